// Safetensors reading and writing (see core/serialization.h). The header parser and validator
// work on bytes alone; the tensor glue (allocation, host copies) is at the bottom of the file.
#include "core/serialization.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <system_error>

#include <nlohmann/json.hpp>

#include "core/detail/checked_math.h"
#include "core/fd_io.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; ember's serializer assumes a little-endian host");

namespace ember {
namespace {

// Note [Safetensors validation]
// A safetensors file is: 8 bytes little-endian N; N bytes of JSON (UTF-8, padded with spaces);
// then the byte buffer. The reader checks, before reading any tensor data:
//   - the file has at least 8 bytes; N <= kSafetensorsMaxHeaderBytes and N <= file size - 8;
//   - the header is valid UTF-8 and valid JSON, nested at most kMaxJsonDepth deep, with no
//     duplicate key in any object, and is an object;
//   - "__metadata__", when present, is null or an object whose values are all strings;
//   - every other key is a non-empty tensor name mapped to an object with exactly the fields
//     dtype (a name ember supports), shape (a list of non-negative integers) and data_offsets
//     (two non-negative integers, begin <= end <= buffer size), where end - begin equals
//     numel * element_size (products checked for overflow);
//   - the ranges, sorted by offset, tile the byte buffer exactly: no overlap, no hole, no
//     trailing bytes (the reference implementation's InvalidOffset/MetadataIncompleteBuffer).
// The loader then rejects bool data whose bytes are not 0 or 1 (a C++ bool must be one of those).
// Unlike the reference implementation, a header may begin with JSON whitespace, and unknown
// fields in a tensor entry are errors rather than ignored.

constexpr int kMaxJsonDepth = 16;  // ours need 3: header object, entry object, shape list

using Json = nlohmann::ordered_json;

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypeNames[] = {
    {kFloat32, "F32"}, {kFloat64, "F64"}, {kInt64, "I64"},  {kInt32, "I32"},
    {kBool, "BOOL"},   {kBFloat16, "BF16"}, {kFloat16, "F16"},
};

const char* st_dtype_name(DType dtype) {
  for (const auto& d : kDTypeNames)
    if (d.dtype == dtype) return d.name;
  EMBER_THROW(TypeError, "save_safetensors: dtype ", dtype, " has no safetensors name");
}

bool st_dtype_from_name(std::string_view name, DType* dtype) {
  for (const auto& d : kDTypeNames) {
    if (name == d.name) {
      *dtype = d.dtype;
      return true;
    }
  }
  return false;
}

std::string supported_dtype_list() {
  std::string s;
  for (const auto& d : kDTypeNames) {
    if (!s.empty()) s += ", ";
    s += d.name;
  }
  return s;
}

std::string os_error(int err) { return std::error_code(err, std::generic_category()).message(); }

/// Returns the offset of the first byte that breaks UTF-8, or npos when `s` is valid UTF-8
/// (no overlong forms, no surrogates, nothing above U+10FFFF).
size_t invalid_utf8_at(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1Fu;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0Fu;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07u;
    } else {
      return i;
    }
    if (n - i < len) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0u) != 0x80u) return i;
      cp = (cp << 6) | (p[i + k] & 0x3Fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return i;
    i += len;
  }
  return std::string_view::npos;
}

// Every format error names the file; those about one tensor also name the tensor.
#define ST_FAIL(source, ...) EMBER_THROW(ValueError, "safetensors file '", source, "': ", __VA_ARGS__)
#define ST_FAIL_TENSOR(source, name, ...) \
  EMBER_THROW(ValueError, "safetensors file '", source, "': tensor '", name, "': ", __VA_ARGS__)

Json parse_json(std::string_view text, const std::string& source) {
  size_t bad = invalid_utf8_at(text);
  if (bad != std::string_view::npos) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(text[bad])));
    ST_FAIL(source, "header is not valid UTF-8 (bad byte ", byte, " at header offset ", bad, ")");
  }
  // Track the keys of every open object to reject duplicates (nlohmann would keep the last),
  // and the nesting depth so hostile input cannot recurse deeply.
  std::vector<std::set<std::string>> open_objects;
  int depth = 0;
  Json::parser_callback_t cb = [&](int, Json::parse_event_t event, Json& parsed) -> bool {
    switch (event) {
      case Json::parse_event_t::object_start:
        open_objects.emplace_back();
        [[fallthrough]];
      case Json::parse_event_t::array_start:
        if (++depth > kMaxJsonDepth) ST_FAIL(source, "header JSON is nested deeper than ", kMaxJsonDepth, " levels");
        break;
      case Json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        [[fallthrough]];
      case Json::parse_event_t::array_end:
        --depth;
        break;
      case Json::parse_event_t::key:
        if (!open_objects.empty() && parsed.is_string() &&
            !open_objects.back().insert(parsed.get<std::string>()).second)
          ST_FAIL(source, "header has a duplicate key '", parsed.get<std::string>(), "'");
        break;
      case Json::parse_event_t::value:
        break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    ST_FAIL(source, "header is not valid JSON: ", e.what());
  }
}

/// A JSON value as a non-negative integer that fits `max`; false otherwise.
bool as_count(const Json& v, uint64_t max, uint64_t* out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > max) return false;
    *out = u;
    return true;
  }
  if (v.is_number_integer()) {  // signed: nlohmann stores non-negative literals as unsigned
    int64_t i = v.get<int64_t>();
    if (i < 0 || static_cast<uint64_t>(i) > max) return false;
    *out = static_cast<uint64_t>(i);
    return true;
  }
  return false;
}

std::string describe(const Json& v) {
  std::string s = v.dump();
  if (s.size() > 64) s = s.substr(0, 61) + "...";
  return s + " (" + v.type_name() + ")";
}

SafetensorsEntry parse_entry(const std::string& name, const Json& value, uint64_t buffer_num_bytes,
                             const std::string& source) {
  if (name.empty()) ST_FAIL(source, "header has an empty tensor name");
  if (!value.is_object())
    ST_FAIL_TENSOR(source, name, "entry is not an object with dtype, shape and data_offsets; found ", describe(value));
  for (const auto& [field, unused] : value.items()) {
    if (field != "dtype" && field != "shape" && field != "data_offsets")
      ST_FAIL_TENSOR(source, name, "unexpected field '", field, "' (expected only dtype, shape, data_offsets)");
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(field)) ST_FAIL_TENSOR(source, name, "missing field '", field, "'");
  }
  SafetensorsEntry e;
  e.name = name;

  const Json& dtype = value["dtype"];
  if (!dtype.is_string()) ST_FAIL_TENSOR(source, name, "dtype must be a string, found ", describe(dtype));
  if (!st_dtype_from_name(dtype.get<std::string>(), &e.dtype))
    ST_FAIL_TENSOR(source, name, "unknown or unsupported dtype '", dtype.get<std::string>(), "' (expected one of ",
                   supported_dtype_list(), ")");

  const Json& shape = value["shape"];
  if (!shape.is_array())
    ST_FAIL_TENSOR(source, name, "shape must be a list of non-negative integers, found ", describe(shape));
  constexpr uint64_t kMaxDim = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  for (size_t i = 0; i < shape.size(); ++i) {
    uint64_t d;
    if (!as_count(shape[i], kMaxDim, &d))
      ST_FAIL_TENSOR(source, name, "shape must be a list of non-negative integers; dimension ", i, " is ",
                     describe(shape[i]));
    e.shape.push_back(static_cast<int64_t>(d));
  }
  const uint64_t elem = element_size(e.dtype);
  // Element count, byte count and contiguous strides must all fit in int64, a zero dimension
  // notwithstanding ([0, 2^62, 2^62] has no elements but no representable strides either).
  uint64_t nbytes = 0;
  try {
    nbytes = detail::checked_nbytes(e.shape, elem, "load_safetensors");
  } catch (const ValueError&) {
    ST_FAIL_TENSOR(source, name, "shape ", e.shape, " overflows: its element count, byte count (element size ",
                   elem, ") or strides do not fit in 64 bits");
  }

  const Json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    ST_FAIL_TENSOR(source, name, "data_offsets must be a list of 2 non-negative integers [begin, end], found ",
                   describe(offsets));
  if (!as_count(offsets[0], std::numeric_limits<uint64_t>::max(), &e.begin) ||
      !as_count(offsets[1], std::numeric_limits<uint64_t>::max(), &e.end))
    ST_FAIL_TENSOR(source, name, "data_offsets must be 2 non-negative integers [begin, end], found ",
                   describe(offsets));
  if (e.begin > e.end)
    ST_FAIL_TENSOR(source, name, "data_offsets begin ", e.begin, " is greater than end ", e.end);
  if (e.end > buffer_num_bytes)
    ST_FAIL_TENSOR(source, name, "data_offsets end ", e.end, " is beyond the byte buffer of ", buffer_num_bytes,
                   " bytes (file truncated?)");
  if (e.end - e.begin != nbytes)
    ST_FAIL_TENSOR(source, name, "data_offsets span ", e.end - e.begin, " bytes but dtype ", dtype.get<std::string>(),
                   " with shape ", e.shape, " needs ", nbytes, " bytes (size mismatch)");
  return e;
}

std::map<std::string, std::string> parse_metadata(const Json& value, const std::string& source) {
  std::map<std::string, std::string> out;
  if (value.is_null()) return out;
  if (!value.is_object())
    ST_FAIL(source, "__metadata__ must be an object mapping strings to strings, found ", describe(value));
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string())
      ST_FAIL(source, "__metadata__ value for key '", key, "' must be a string, found ", describe(v));
    out.emplace(key, v.get<std::string>());
  }
  return out;
}

void check_coverage(std::vector<SafetensorsEntry>& entries, uint64_t buffer_num_bytes, const std::string& source) {
  std::stable_sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const SafetensorsEntry* prev = nullptr;
  for (const auto& e : entries) {
    if (e.begin < covered)
      ST_FAIL_TENSOR(source, e.name, "data_offsets [", e.begin, ", ", e.end, "] overlap tensor '", prev->name,
                     "' at [", prev->begin, ", ", prev->end, "]");
    if (e.begin > covered)
      ST_FAIL_TENSOR(source, e.name, "data_offsets begin at ", e.begin, " but the previous tensor ends at ", covered,
                     ": a gap of ", e.begin - covered, " bytes not covered by any tensor");
    covered = e.end;
    prev = &e;
  }
  if (covered != buffer_num_bytes)
    ST_FAIL(source, "the byte buffer has ", buffer_num_bytes, " bytes but tensors cover only ", covered,
            ": a gap of ", buffer_num_bytes - covered, " trailing bytes (incomplete metadata)");
}

// ---- file helpers --------------------------------------------------------------------------

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

std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void write_all(int fd, const void* buf, size_t n, const std::string& path, const std::string& tmp) {
  const io::Transfer t = io::write_full(fd, buf, n);
  if (!t.complete(n))
    EMBER_THROW(Error, "save_safetensors: cannot write '", path, "' (temporary file '", tmp, "'): ", os_error(t.error));
}

/// The temporary file a save writes; removed on destruction unless committed.
struct TempFile {
  std::string path;
  int fd = -1;
  bool committed = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!committed && !path.empty()) ::unlink(path.c_str());
  }
};

void create_temp(const std::string& path, TempFile* tmp) {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  int last_errno = 0;
  for (int attempt = 0; attempt < 16; ++attempt) {
    uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
    std::string name = path + ".tmp." + std::to_string(::getpid()) + "." + hex;
    int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      tmp->path = std::move(name);
      tmp->fd = fd;
      return;
    }
    last_errno = errno;
    if (errno != EEXIST && errno != EINTR) break;
  }
  EMBER_THROW(Error, "save_safetensors: cannot create a temporary file next to '", path, "': ", os_error(last_errno));
}

}  // namespace

// ---- header parsing ------------------------------------------------------------------------

SafetensorsHeader parse_safetensors_header(std::string_view header_json, uint64_t buffer_num_bytes,
                                           const std::string& source) {
  // See Note [Safetensors validation].
  Json root = parse_json(header_json, source);
  if (!root.is_object()) ST_FAIL(source, "header is not a JSON object; found ", describe(root));
  SafetensorsHeader h;
  h.header_num_bytes = header_json.size();
  h.buffer_num_bytes = buffer_num_bytes;
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      h.metadata = parse_metadata(value, source);
    } else {
      h.entries.push_back(parse_entry(key, value, buffer_num_bytes, source));
    }
  }
  check_coverage(h.entries, buffer_num_bytes, source);
  return h;
}

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
  for (const auto& e : h.entries) {
    Tensor t = empty(e.shape, TensorOptions(e.dtype).device(host));
    const uint64_t nbytes = e.end - e.begin;
    if (nbytes > 0) pread_exact(f.fd.fd, t.raw_data(), nbytes, data_start + e.begin, path);
    if (e.dtype == kBool) {
      const auto* b = static_cast<const unsigned char*>(t.raw_data());
      for (uint64_t i = 0; i < nbytes; ++i) {
        if (b[i] > 1)
          ST_FAIL_TENSOR(path, e.name, "bool element ", i, " has byte value ", static_cast<int>(b[i]),
                         " (expected 0 or 1)");
      }
    }
    if (!device.is_cpu()) t = native::to(t, device);
    out.emplace_back(e.name, std::move(t));
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
  std::vector<Tensor> host;
  host.reserve(tensors.size());
  Json root = Json::object();
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [key, value] : metadata) m[key] = value;
    root["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    Tensor c = t;
    if (!c.device().is_cpu()) c = native::to(c, Device::cpu());
    if (!c.is_contiguous()) c = native::contiguous(c);
    const uint64_t nbytes = c.nbytes();
    Json entry = Json::object();
    entry["dtype"] = st_dtype_name(c.dtype());
    entry["shape"] = c.sizes();
    entry["data_offsets"] = {offset, offset + nbytes};
    root[name] = std::move(entry);
    offset += nbytes;
    host.push_back(std::move(c));
  }
  std::string header = root.dump();
  while (header.size() % 8 != 0) header.push_back(' ');
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(static_cast<uint64_t>(header.size()) >> (8 * i));

  // 3. Temporary file, fsync, rename.
  TempFile tmp;
  create_temp(path, &tmp);
  struct stat old;
  if (::stat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode))
    (void)::fchmod(tmp.fd, old.st_mode & 0777);  // keep the permissions of the file we replace
  write_all(tmp.fd, len_bytes, 8, path, tmp.path);
  write_all(tmp.fd, header.data(), header.size(), path, tmp.path);
  for (const Tensor& c : host) {
    if (c.nbytes() > 0) write_all(tmp.fd, c.raw_data(), c.nbytes(), path, tmp.path);
  }
  if (::fsync(tmp.fd) != 0)
    EMBER_THROW(Error, "save_safetensors: cannot fsync '", tmp.path, "' for '", path, "': ", os_error(errno));
  int fd = tmp.fd;
  tmp.fd = -1;
  if (::close(fd) != 0)
    EMBER_THROW(Error, "save_safetensors: cannot close '", tmp.path, "' for '", path, "': ", os_error(errno));
  if (::rename(tmp.path.c_str(), path.c_str()) != 0)
    EMBER_THROW(Error, "save_safetensors: cannot rename '", tmp.path, "' to '", path, "': ", os_error(errno));
  tmp.committed = true;
  // Make the rename itself durable. Best effort: the new file is already in place.
  Fd dir(::open(parent_dir(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.fd >= 0) (void)::fsync(dir.fd);
}

}  // namespace ember
