// Safetensors reading and writing (see core/serialization.h): the file I/O and the tensor
// glue. The header's format and parser are core/detail/safetensors_header.*, the atomic
// replacement of the file core/detail/atomic_file.*.
#include "core/serialization.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <set>
#include <system_error>

#include <nlohmann/json.hpp>

#include "core/detail/atomic_file.h"
#include "core/detail/safetensors_header.h"
#include "core/fd_io.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; ember's serializer assumes a little-endian host");

namespace ember {
namespace {

using detail::invalid_utf8_at;
using Json = nlohmann::json;

std::string os_error(int err) { return std::error_code(err, std::generic_category()).message(); }

struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

/// Reads exactly `n` bytes at `offset`; throws Error on an OS error or a short file.
void pread_exact(int fd, void* buf, uint64_t n, uint64_t offset, const std::string& path) {
  const io::Transfer t = io::pread_full(fd, buf, static_cast<size_t>(n), offset);
  if (t.error != 0) EMBER_THROW(Error, "load_safetensors: cannot read '", path, "': ", os_error(t.error));
  if (!t.complete(static_cast<size_t>(n)))
    EMBER_THROW(ValueError, "safetensors file '", path, "': unexpected end of file at byte ", offset + t.bytes,
                " (was the file truncated while being read?)");
}

struct OpenedFile {
  Fd fd;
  uint64_t size = 0;
};

void open_for_read(const std::string& path, OpenedFile* f) {
  // O_NONBLOCK: a FIFO at `path` must not hang the open; it is rejected below as not a regular file.
  f->fd.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f->fd.fd < 0) EMBER_THROW(Error, "load_safetensors: cannot open '", path, "': ", os_error(errno));
  struct stat st;
  if (::fstat(f->fd.fd, &st) != 0) EMBER_THROW(Error, "load_safetensors: cannot stat '", path, "': ", os_error(errno));
  if (!S_ISREG(st.st_mode)) EMBER_THROW(Error, "load_safetensors: '", path, "' is not a regular file");
  f->size = static_cast<uint64_t>(st.st_size);
}

SafetensorsHeader read_header(const OpenedFile& f, const std::string& path) {
  if (f.size < 8)
    ST_FAIL(path, "file is ", f.size, " bytes, shorter than the 8-byte header length (truncated or not safetensors)");
  unsigned char len_bytes[8];
  pread_exact(f.fd.fd, len_bytes, 8, 0, path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  if (n > kSafetensorsMaxHeaderBytes)
    ST_FAIL(path, "header length ", n, " exceeds the cap of ", kSafetensorsMaxHeaderBytes,
            " bytes (corrupt or not a safetensors file)");
  if (n > f.size - 8)
    ST_FAIL(path, "header length ", n, " is larger than the ", f.size - 8,
            " bytes that follow the length field (file truncated?)");
  std::string text(static_cast<size_t>(n), '\0');
  pread_exact(f.fd.fd, text.data(), n, 8, path);
  return parse_safetensors_header(text, f.size - 8 - n, path);
}

}  // namespace

SafetensorsHeader read_safetensors_header(const std::string& path) {
  OpenedFile f;
  open_for_read(path, &f);
  return read_header(f, path);
}

// ---- tensor glue ---------------------------------------------------------------------------

std::vector<std::pair<std::string, Tensor>> load_safetensors(const std::string& path,
                                                             std::map<std::string, std::string>* metadata,
                                                             Device device) {
  OpenedFile f;
  open_for_read(path, &f);
  SafetensorsHeader h = read_header(f, path);
  const uint64_t data_start = 8 + h.header_num_bytes;
  // CPU memory of any logical CPU device is host memory: read straight into it.
  const Device host = device.is_cpu() ? device : Device::cpu();
  std::vector<std::pair<std::string, Tensor>> out;
  out.reserve(h.entries.size());
  // The entries tile the byte buffer in offset order (check_coverage), so small tensors are
  // read kReadChunk bytes at a time and copied out of that chunk: one read per chunk, not one
  // per tensor (200k tensors were 200k preads). A tensor of a chunk or more is read in place.
  constexpr uint64_t kReadChunk = uint64_t{4} << 20;
  std::vector<char> chunk;
  uint64_t chunk_begin = 0, chunk_end = 0;  // the buffer range `chunk` holds
  for (auto& e : h.entries) {
    Tensor t = empty(e.shape, TensorOptions(e.dtype).device(host));
    const uint64_t nbytes = e.end - e.begin;
    if (nbytes >= kReadChunk) {
      pread_exact(f.fd.fd, t.raw_data(), nbytes, data_start + e.begin, path);
    } else if (nbytes > 0) {
      if (e.begin < chunk_begin || e.end > chunk_end) {
        chunk_begin = e.begin;
        chunk_end = std::min(h.buffer_num_bytes, e.begin + kReadChunk);  // >= e.end
        chunk.resize(static_cast<size_t>(chunk_end - chunk_begin));
        pread_exact(f.fd.fd, chunk.data(), chunk_end - chunk_begin, data_start + chunk_begin, path);
      }
      std::memcpy(t.raw_data(), chunk.data() + (e.begin - chunk_begin), static_cast<size_t>(nbytes));
    }
    if (e.dtype == kBool) {
      const auto* b = static_cast<const unsigned char*>(t.raw_data());
      for (uint64_t i = 0; i < nbytes; ++i) {
        if (b[i] > 1)
          ST_FAIL_TENSOR(path, e.name, "bool element ", i, " has byte value ", static_cast<int>(b[i]),
                         " (expected 0 or 1)");
      }
    }
    if (!device.is_cpu()) t = native::to(t, device);
    out.emplace_back(std::move(e.name), std::move(t));
  }
  if (metadata) *metadata = std::move(h.metadata);
  return out;
}

std::map<std::string, Tensor> load_safetensors_map(const std::string& path,
                                                   std::map<std::string, std::string>* metadata, Device device) {
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : load_safetensors(path, metadata, device)) out.emplace(name, std::move(t));
  return out;
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // 1. Check everything that can be wrong with the arguments before creating any file.
  std::set<std::string_view> seen;
  for (const auto& [name, t] : tensors) {
    EMBER_CHECK_T(ValueError, !name.empty(), "save_safetensors('", path, "'): empty tensor name");
    EMBER_CHECK_T(ValueError, name != "__metadata__", "save_safetensors('", path,
                  "'): '__metadata__' is reserved and cannot name a tensor");
    EMBER_CHECK_T(ValueError, invalid_utf8_at(name) == std::string_view::npos, "save_safetensors('", path,
                  "'): tensor name '", name, "' is not valid UTF-8");
    EMBER_CHECK_T(ValueError, seen.insert(name).second, "save_safetensors('", path, "'): duplicate tensor name '",
                  name, "'");
    EMBER_CHECK_T(ValueError, t.defined(), "save_safetensors('", path, "'): tensor '", name, "' is undefined");
  }
  for (const auto& [key, value] : metadata) {
    EMBER_CHECK_T(ValueError, invalid_utf8_at(key) == std::string_view::npos, "save_safetensors('", path,
                  "'): metadata key '", key, "' is not valid UTF-8");
    EMBER_CHECK_T(ValueError, invalid_utf8_at(value) == std::string_view::npos, "save_safetensors('", path,
                  "'): metadata value for key '", key, "' is not valid UTF-8");
  }

  // 2. Contiguous host copies where needed, and the header.
  // The header text is built directly, in the given order (linear time; Json::dump quotes names).
  std::vector<Tensor> host;
  host.reserve(tensors.size());
  std::string header = "{";
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [key, value] : metadata) m[key] = value;
    header += "\"__metadata__\":" + m.dump();
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    Tensor c = t;
    if (!c.device().is_cpu()) c = native::to(c, Device::cpu());
    if (!c.is_contiguous()) c = native::contiguous(c);
    const uint64_t nbytes = c.nbytes();
    if (header.size() > 1) header += ',';
    header += Json(name).dump();
    header += ":{\"dtype\":\"";
    header += detail::st_dtype_name(c.dtype());
    header += "\",\"shape\":[";
    for (size_t d = 0; d < c.sizes().size(); ++d) {
      if (d) header += ',';
      header += std::to_string(c.sizes()[d]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + nbytes) + "]}";
    offset += nbytes;
    host.push_back(std::move(c));
  }
  header += '}';
  while (header.size() % 8 != 0) header.push_back(' ');
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(static_cast<uint64_t>(header.size()) >> (8 * i));

  // 3. Temporary file, fsync, rename (Note [Checkpoint temporaries] in core/detail/atomic_file.cpp).
  detail::AtomicFile file(path, "save_safetensors");
  file.write(len_bytes, 8);
  file.write(header.data(), header.size());
  for (const Tensor& c : host) {
    if (c.nbytes() > 0) file.write(c.raw_data(), c.nbytes());
  }
  file.commit();
}

}  // namespace ember
