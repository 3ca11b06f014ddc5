// Reading the King James Bible that Debian's bible-kjv-text package installs as
// /usr/lib/bible.data: a header, a table of block offsets, and blocks of text each compressed on
// its own by compress(1)'s LZW (see Note [bible.data] in bible_data.cpp). Stateless.
#pragma once
#include <cstdint>
#include <string>

namespace word_lm {

inline constexpr const char* kDefaultBibleData = "/usr/lib/bible.data";

/// The whole text: a title line, then one line per verse ("Ge1:1 In the beginning God created
/// the heaven and the earth."). Throws ember::ValueError naming the file when it is missing
/// (and says which package installs it), is not in the format, or a block does not decode to
/// its stated size.
std::string read_bible_text(const std::string& path = kDefaultBibleData);

/// Decodes one compress(1) stream without its 3-byte header (16-bit codes, block mode), as the
/// blocks of bible.data are stored. At most `max_out` bytes; throws ember::ValueError naming
/// `what` on a corrupt stream.
std::string lzw_decode(const uint8_t* data, size_t num_bytes, size_t max_out, const std::string& what);

}  // namespace word_lm
