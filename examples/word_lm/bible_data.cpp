#include "examples/word_lm/bible_data.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "core/error.h"

namespace word_lm {

// Note [bible.data]
// The file bible-kjv-text installs (format tag "EC02", written by the bible-kjv tools):
//   bytes 0..3        "EC02" (then the text "Compressed Data File", zero padded)
//   0x54, 0x58        block size (65536: the uncompressed size of every block but the last)
//                     and block count, big-endian uint32
//   0x5C              block count + 1 big-endian uint32 file offsets: block i's compressed
//                     bytes are [offset[i], offset[i + 1]), the last offset is the file size
// Each block is a compress(1) stream of its own without the stream's 3-byte header (1F 9D 90:
// 16-bit codes, block mode; the file holds that header once, before the first block). Blocks
// concatenated give the text. The decoder follows compress(1)'s rules: codes are read LSB
// first, 9 bits wide at first, one bit wider each time the table fills the current width, up to
// 16; code 256 clears the table; and whenever the width changes (or the table is cleared) the
// reader skips to the end of the current group of 8 codes (n_bits bytes), because compress
// writes codes in such groups.

namespace {

using ember::ValueError;

uint32_t be32(const std::string& s, size_t at) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(s[at])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 2])) << 8) |
         static_cast<uint32_t>(static_cast<uint8_t>(s[at + 3]));
}

}  // namespace

std::string lzw_decode(const uint8_t* data, size_t num_bytes, size_t max_out, const std::string& what) {
  constexpr int kInitBits = 9, kMaxBits = 16;
  constexpr int32_t kClear = 256, kFirst = 257, kTableSize = 1 << kMaxBits;
  std::vector<uint16_t> prefix(kTableSize, 0);
  std::vector<uint8_t> suffix(kTableSize, 0);
  for (int32_t i = 0; i < 256; ++i) suffix[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
  std::vector<uint8_t> stack;
  stack.reserve(kTableSize);

  const uint64_t total_bits = static_cast<uint64_t>(num_bytes) * 8;
  uint64_t pos = 0, group_start = 0;  // bit positions; groups are counted from group_start
  int n_bits = kInitBits;
  int32_t max_code = (1 << n_bits) - 1;
  int32_t free_ent = kFirst;
  int32_t old_code = -1;
  uint8_t fin_char = 0;
  std::string out;
  auto skip_to_group_end = [&] {
    const uint64_t group_bits = static_cast<uint64_t>(n_bits) * 8;
    pos = group_start + (pos - group_start + group_bits - 1) / group_bits * group_bits;
    group_start = pos;
  };
  for (;;) {
    if (free_ent > max_code && n_bits < kMaxBits) {
      skip_to_group_end();
      ++n_bits;
      max_code = n_bits == kMaxBits ? kTableSize : (1 << n_bits) - 1;
    }
    if (pos + static_cast<uint64_t>(n_bits) > total_bits) break;
    const size_t byte = static_cast<size_t>(pos >> 3);
    uint32_t window = data[byte];
    if (byte + 1 < num_bytes) window |= static_cast<uint32_t>(data[byte + 1]) << 8;
    if (byte + 2 < num_bytes) window |= static_cast<uint32_t>(data[byte + 2]) << 16;
    int32_t code = static_cast<int32_t>((window >> (pos & 7)) & ((1u << n_bits) - 1));
    pos += static_cast<uint64_t>(n_bits);

    if (old_code == -1) {
      EMBER_CHECK_T(ValueError, code < 256, what, ": corrupt LZW stream (first code ", code, " is not a byte)");
      fin_char = static_cast<uint8_t>(code);
      old_code = code;
      out.push_back(static_cast<char>(fin_char));
      continue;
    }
    if (code == kClear) {
      skip_to_group_end();
      free_ent = kFirst - 1;
      n_bits = kInitBits;
      max_code = (1 << n_bits) - 1;
      continue;
    }
    const int32_t in_code = code;
    stack.clear();
    if (code >= free_ent) {  // the code being defined right now (the KwKwK case)
      EMBER_CHECK_T(ValueError, code == free_ent, what, ": corrupt LZW stream (code ", code, " before entry ",
                    free_ent, " exists)");
      stack.push_back(fin_char);
      code = old_code;
    }
    while (code >= 256) {
      stack.push_back(suffix[static_cast<size_t>(code)]);
      code = prefix[static_cast<size_t>(code)];
    }
    fin_char = suffix[static_cast<size_t>(code)];
    stack.push_back(fin_char);
    EMBER_CHECK_T(ValueError, out.size() + stack.size() <= max_out, what, ": LZW stream decodes to more than ",
                  max_out, " bytes");
    out.append(stack.rbegin(), stack.rend());
    if (free_ent < kTableSize) {
      prefix[static_cast<size_t>(free_ent)] = static_cast<uint16_t>(old_code);
      suffix[static_cast<size_t>(free_ent)] = fin_char;
      ++free_ent;
    }
    old_code = in_code;
  }
  return out;
}

std::string read_bible_text(const std::string& path) {
  EMBER_CHECK_T(ValueError, std::filesystem::exists(path), "the corpus ", path,
                " does not exist (Debian's bible-kjv-text package installs it: apt-get install bible-kjv-text, "
                "or run scripts/setup.sh)");
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EMBER_CHECK_T(ValueError, file.size() >= 0x5C && file.compare(0, 4, "EC02") == 0, path,
                " is not a bible-kjv data file (expected the tag EC02 and a header of 92 bytes, got ", file.size(),
                " bytes)");
  const uint32_t block_size = be32(file, 0x54), blocks = be32(file, 0x58);
  EMBER_CHECK_T(ValueError, block_size > 0 && block_size <= (1u << 24) && blocks > 0 &&
                                0x5C + (static_cast<size_t>(blocks) + 1) * 4 <= file.size(),
                path, ": implausible header (block size ", block_size, ", ", blocks, " blocks, file of ",
                file.size(), " bytes)");
  std::string text;
  text.reserve(static_cast<size_t>(block_size) * blocks);
  for (uint32_t b = 0; b < blocks; ++b) {
    const uint32_t begin = be32(file, 0x5C + 4 * static_cast<size_t>(b));
    const uint32_t end = be32(file, 0x5C + 4 * (static_cast<size_t>(b) + 1));
    EMBER_CHECK_T(ValueError, begin <= end && end <= file.size(), path, ": block ", b,
                  " spans bytes [", begin, ", ", end, ") of a file of ", file.size());
    const std::string what = path + " block " + std::to_string(b);
    std::string part = lzw_decode(reinterpret_cast<const uint8_t*>(file.data()) + begin, end - begin, block_size, what);
    EMBER_CHECK_T(ValueError, part.size() == block_size || (b + 1 == blocks && !part.empty()), what, " decoded to ",
                  part.size(), " bytes; expected ", block_size);
    text += part;
  }
  return text;
}

}  // namespace word_lm
