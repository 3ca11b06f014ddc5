// The safetensors header: ember's dtype names, the UTF-8 check, and the validating parser
// behind parse_safetensors_header (core/serialization.h). See Note [Safetensors validation].
#include "core/detail/safetensors_header.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/detail/checked_math.h"
#include "core/serialization.h"

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
// fields in a tensor entry are errors rather than ignored. Like it, a NUL byte anywhere in the
// header is an error ({...}\0garbage once loaded): only spaces may pad the JSON.
//
// Parsing is linear in the header size (no ordered_json: its insertion is a linear search). A
// header in the form writers produce is read by
// FastHeaderParser without building JSON values; any other goes through nlohmann's SAX parser
// (HeaderSax), which also words every syntax error. Both keep the entries in header order,
// which is what orders 0-byte tensors that share an offset. The loader reads tensor data in
// 4 MiB chunks, not one read per tensor. The writer builds its header text directly.

constexpr int kMaxJsonDepth = 16;  // ours need 3: header object, entry object, shape list

using Json = nlohmann::json;


struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypeNames[] = {
    {kFloat32, "F32"}, {kFloat64, "F64"}, {kInt64, "I64"},  {kInt32, "I32"},
    {kBool, "BOOL"},   {kBFloat16, "BF16"}, {kFloat16, "F16"},
};

}  // namespace

namespace detail {

const char* st_dtype_name(DType dtype) {
  for (const auto& d : kDTypeNames)
    if (d.dtype == dtype) return d.name;
  EMBER_THROW(TypeError, "save_safetensors: dtype ", dtype, " has no safetensors name");
}

/// Returns the offset of the first byte that breaks UTF-8, or npos when `s` is valid UTF-8
/// (no overlong forms, no surrogates, nothing above U+10FFFF).
size_t invalid_utf8_at(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // ASCII (nearly every header byte) eight bytes at a time.
    uint64_t word;
    while (n - i >= sizeof word && (std::memcpy(&word, p + i, sizeof word), (word & 0x8080808080808080ull) == 0))
      i += sizeof word;
    if (i == n) break;
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

}  // namespace detail

namespace {

using detail::invalid_utf8_at;

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

// The checks of an entry whose fields have the right JSON types, shared by the general parser
// (parse_entry) and the fast one (FastHeaderParser), in the order parse_entry makes them.
DType entry_dtype(const std::string& name, std::string_view dtype_name, const std::string& source) {
  DType dtype;
  if (!st_dtype_from_name(dtype_name, &dtype))
    ST_FAIL_TENSOR(source, name, "unknown or unsupported dtype '", dtype_name, "' (expected one of ",
                   supported_dtype_list(), ")");
  return dtype;
}

uint64_t entry_nbytes(const SafetensorsEntry& e, const std::string& source) {
  const uint64_t elem = element_size(e.dtype);
  // Element count, byte count and contiguous strides must all fit in int64, a zero dimension
  // notwithstanding ([0, 2^62, 2^62] has no elements but no representable strides either).
  try {
    return detail::checked_nbytes(e.shape, elem, "load_safetensors");
  } catch (const ValueError&) {
    ST_FAIL_TENSOR(source, e.name, "shape ", e.shape, " overflows: its element count, byte count (element size ",
                   elem, ") or strides do not fit in 64 bits");
  }
}

void check_entry_offsets(const SafetensorsEntry& e, uint64_t nbytes, std::string_view dtype_name,
                         uint64_t buffer_num_bytes, const std::string& source) {
  if (e.begin > e.end)
    ST_FAIL_TENSOR(source, e.name, "data_offsets begin ", e.begin, " is greater than end ", e.end);
  if (e.end > buffer_num_bytes)
    ST_FAIL_TENSOR(source, e.name, "data_offsets end ", e.end, " is beyond the byte buffer of ", buffer_num_bytes,
                   " bytes (file truncated?)");
  if (e.end - e.begin != nbytes)
    ST_FAIL_TENSOR(source, e.name, "data_offsets span ", e.end - e.begin, " bytes but dtype ", dtype_name,
                   " with shape ", e.shape, " needs ", nbytes, " bytes (size mismatch)");
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
  const std::string& dtype_name = dtype.get_ref<const std::string&>();
  e.dtype = entry_dtype(name, dtype_name, source);

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
  const uint64_t nbytes = entry_nbytes(e, source);

  const Json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    ST_FAIL_TENSOR(source, name, "data_offsets must be a list of 2 non-negative integers [begin, end], found ",
                   describe(offsets));
  if (!as_count(offsets[0], std::numeric_limits<uint64_t>::max(), &e.begin) ||
      !as_count(offsets[1], std::numeric_limits<uint64_t>::max(), &e.end))
    ST_FAIL_TENSOR(source, name, "data_offsets must be 2 non-negative integers [begin, end], found ",
                   describe(offsets));
  check_entry_offsets(e, nbytes, dtype_name, buffer_num_bytes, source);
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
  auto by_offset = [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  };
  // Writers list tensors in offset order: then there is nothing to move.
  if (!std::is_sorted(entries.begin(), entries.end(), by_offset))
    std::stable_sort(entries.begin(), entries.end(), by_offset);
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

// ---- the header parser ---------------------------------------------------------------------

// Parses the header in one pass over the parser's events. Only one top-level value at a time
// is built as a JSON value (a tensor entry or __metadata__, a few nodes) and validated at once;
// the top-level object itself is never built. nlohmann's callback parser rescanned the parent
// object at every object end, and an ordered_json object searches linearly on insertion: both
// quadratic in the number of tensors. Rejects a duplicate key in any object (nlohmann would
// keep the last) and nesting deeper than kMaxJsonDepth. Entries come out in header order.
class HeaderSax : public nlohmann::json_sax<Json> {
 public:
  HeaderSax(const std::string& source, uint64_t buffer_num_bytes, SafetensorsHeader* out)
      : source_(source), buffer_num_bytes_(buffer_num_bytes), out_(out) {}

  bool null() override { return put(Json(nullptr)); }
  bool boolean(bool v) override { return put(Json(v)); }
  bool number_integer(number_integer_t v) override { return put(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return put(Json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return put(Json(v)); }
  bool string(string_t& v) override { return put(Json(std::move(v))); }
  bool binary(binary_t&) override { ST_FAIL(source_, "header is not valid JSON: binary value"); }
  bool start_object(std::size_t) override {
    if (!root_started_ && open_.empty()) {  // the header object itself: never built
      root_started_ = in_root_ = true;
      return true;
    }
    return open(Json::object());
  }
  bool end_object() override {
    if (open_.empty()) {  // the header object closes
      in_root_ = false;
      return true;
    }
    return close();
  }
  bool start_array(std::size_t) override { return open(Json::array()); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (open_.empty()) {
      name_ = std::move(k);  // duplicates among tensor names: see check_unique_names
    } else {
      if (open_.back()->contains(k)) ST_FAIL(source_, "header has a duplicate key '", k, "'");
      key_ = std::move(k);
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    ST_FAIL(source_, "header is not valid JSON: ", e.what());
  }

 private:
  // Places `v` where the parser is: a top-level value, the next array element, or key_'s value.
  Json* place(Json&& v) {
    if (open_.empty()) {
      value_ = std::move(v);
      return &value_;
    }
    Json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    return &(parent[key_] = std::move(v));
  }
  bool put(Json&& v) {
    place(std::move(v));
    if (open_.empty()) finish_value();
    return true;
  }
  bool open(Json&& container) {
    if (static_cast<int>(open_.size()) + (in_root_ ? 1 : 0) >= kMaxJsonDepth)
      ST_FAIL(source_, "header JSON is nested deeper than ", kMaxJsonDepth, " levels");
    open_.push_back(place(std::move(container)));  // stable: a parent grows only after this closes
    return true;
  }
  bool close() {
    open_.pop_back();
    if (open_.empty()) finish_value();
    return true;
  }
  // A top-level value is complete: validate it (or reject a header that is not an object).
  void finish_value() {
    if (!in_root_) ST_FAIL(source_, "header is not a JSON object; found ", describe(value_));
    if (name_ == "__metadata__") {
      if (seen_metadata_) ST_FAIL(source_, "header has a duplicate key '__metadata__'");
      seen_metadata_ = true;
      out_->metadata = parse_metadata(value_, source_);
    } else {
      out_->entries.push_back(parse_entry(name_, value_, buffer_num_bytes_, source_));
    }
    value_ = Json();
  }

  const std::string& source_;
  const uint64_t buffer_num_bytes_;
  SafetensorsHeader* out_;
  bool root_started_ = false;
  bool in_root_ = false;                   // inside the header object
  bool seen_metadata_ = false;
  std::string name_;                       // the top-level key whose value is being read
  Json value_;                             // that value
  std::vector<Json*> open_;                // arrays and objects of value_ being filled, outermost first
  std::string key_;                        // the key whose value comes next in open_.back()
};

// The fast path for the headers save_safetensors and Python's safetensors write:
//   {"<name>":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}, ..., "__metadata__":{"k":"v"}}
// (fields in any order, any JSON whitespace). It builds no JSON value: one pass over the bytes,
// each entry checked by the same functions as parse_entry's (entry_dtype, entry_nbytes,
// check_entry_offsets), so a well-formed header with a bad value fails with the same words at
// the same entry. Anything else it does not decide: a string with an escape, a number that is
// not a plain unsigned integer, a missing, repeated or unknown field, a second __metadata__,
// any syntax error. parse() then returns false, having kept nothing, and the general parser
// (HeaderSax) reads the header and words the error. The reason for a second reader: nlohmann's
// SAX builds a JSON value per entry, which dominates the cost of a header of many entries.
class FastHeaderParser {
 public:
  FastHeaderParser(std::string_view text, const std::string& source, SafetensorsHeader* out)
      : p_(text.data()), end_(text.data() + text.size()), source_(source), out_(out) {}

  bool parse() {
    if (!parse_root()) {
      out_->entries.clear();
      out_->metadata.clear();
      return false;
    }
    return true;
  }

 private:
  bool parse_root() {
    ws();
    if (!eat('{')) return false;
    ws();
    if (eat('}')) return at_end();
    bool seen_metadata = false;
    while (true) {
      std::string_view key;
      if (!string(&key) || !colon()) return false;
      if (key == "__metadata__") {
        if (seen_metadata || !metadata()) return false;
        seen_metadata = true;
      } else if (!entry(key)) {
        return false;
      }
      ws();
      if (eat('}')) return at_end();
      if (!eat(',')) return false;
      ws();
    }
  }
  bool entry(std::string_view name) {
    if (name.empty() || !eat('{')) return false;
    SafetensorsEntry e;
    std::string_view dtype;
    uint64_t offsets[2];
    int num_offsets = 0;
    bool has_dtype = false, has_shape = false, has_offsets = false;
    ws();
    while (true) {
      std::string_view field;
      if (!string(&field) || !colon()) return false;
      if (field == "dtype" && !has_dtype) {
        if (!string(&dtype)) return false;
        has_dtype = true;
      } else if (field == "shape" && !has_shape) {
        constexpr uint64_t kMaxDim = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
        if (!array([&](uint64_t d) { return d <= kMaxDim && (e.shape.push_back(static_cast<int64_t>(d)), true); }))
          return false;
        has_shape = true;
      } else if (field == "data_offsets" && !has_offsets) {
        if (!array([&](uint64_t v) { return num_offsets < 2 && (offsets[num_offsets++] = v, true); }) ||
            num_offsets != 2)
          return false;
        has_offsets = true;
      } else {
        return false;
      }
      ws();
      if (eat('}')) break;
      if (!eat(',')) return false;
      ws();
    }
    if (!has_dtype || !has_shape || !has_offsets) return false;
    e.name.assign(name);
    e.dtype = entry_dtype(e.name, dtype, source_);
    const uint64_t nbytes = entry_nbytes(e, source_);
    e.begin = offsets[0];
    e.end = offsets[1];
    check_entry_offsets(e, nbytes, dtype, out_->buffer_num_bytes, source_);
    out_->entries.push_back(std::move(e));
    return true;
  }
  bool metadata() {
    if (end_ - p_ >= 4 && std::string_view(p_, 4) == "null") {
      p_ += 4;
      return true;
    }
    if (!eat('{')) return false;
    ws();
    if (eat('}')) return true;
    while (true) {
      std::string_view key, value;
      if (!string(&key) || !colon() || !string(&value)) return false;
      if (!out_->metadata.emplace(key, value).second) return false;  // a duplicate key
      ws();
      if (eat('}')) return true;
      if (!eat(',')) return false;
      ws();
    }
  }
  // [n, ...] of plain unsigned integers, each passed to `each` (false: not ours to decide).
  template <typename F>
  bool array(F&& each) {
    if (!eat('[')) return false;
    ws();
    if (eat(']')) return true;
    while (true) {
      uint64_t v;
      if (!number(&v) || !each(v)) return false;
      ws();
      if (eat(']')) return true;
      if (!eat(',')) return false;
      ws();
    }
  }
  bool number(uint64_t* out) {
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
    if (*p_ == '0' && end_ - p_ > 1 && p_[1] >= '0' && p_[1] <= '9') return false;  // a leading zero
    const auto [next, ec] = std::from_chars(p_, end_, *out);
    if (ec != std::errc()) return false;  // beyond uint64
    p_ = next;
    return p_ == end_ || (*p_ != '.' && *p_ != 'e' && *p_ != 'E');
  }
  // A string without escapes or control characters (the bytes were checked to be UTF-8).
  bool string(std::string_view* out) {
    if (!eat('"')) return false;
    const char* close = static_cast<const char*>(std::memchr(p_, '"', static_cast<size_t>(end_ - p_)));
    if (close == nullptr) return false;
    for (const char* c = p_; c < close; ++c) {
      if (*c == '\\' || static_cast<unsigned char>(*c) < 0x20) return false;
    }
    *out = std::string_view(p_, static_cast<size_t>(close - p_));
    p_ = close + 1;
    return true;
  }
  bool colon() {
    ws();
    if (!eat(':')) return false;
    ws();
    return true;
  }
  bool eat(char c) {
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }
  void ws() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  bool at_end() {
    ws();
    return p_ == end_;
  }

  const char* p_;
  const char* end_;
  const std::string& source_;
  SafetensorsHeader* out_;
};

// A duplicate top-level key (the first repeated one in header order). One hash set reserved
// for every name: sorting 200k names that share long prefixes cost more in comparisons.
void check_unique_names(const std::vector<SafetensorsEntry>& entries, const std::string& source) {
  std::unordered_set<std::string_view> names;
  names.reserve(entries.size());
  for (const auto& e : entries) {
    if (!names.insert(e.name).second) ST_FAIL(source, "header has a duplicate key '", e.name, "'");
  }
}

void parse_header_json(std::string_view text, const std::string& source, SafetensorsHeader* h) {
  if (size_t nul = text.find('\0'); nul != std::string_view::npos)
    ST_FAIL(source, "header has a NUL byte at header offset ", nul, " (only spaces may follow the JSON)");
  size_t bad = invalid_utf8_at(text);
  if (bad != std::string_view::npos) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(text[bad])));
    ST_FAIL(source, "header is not valid UTF-8 (bad byte ", byte, " at header offset ", bad, ")");
  }
  if (FastHeaderParser(text, source, h).parse()) {
    check_unique_names(h->entries, source);
    return;
  }
  HeaderSax sax(source, h->buffer_num_bytes, h);
  try {
    Json::sax_parse(text.begin(), text.end(), &sax, nlohmann::json::input_format_t::json, /*strict=*/true,
                    /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    ST_FAIL(source, "header is not valid JSON: ", e.what());
  }
  check_unique_names(h->entries, source);
}

}  // namespace

SafetensorsHeader parse_safetensors_header(std::string_view header_json, uint64_t buffer_num_bytes,
                                           const std::string& source) {
  // See Note [Safetensors validation].
  SafetensorsHeader h;
  h.header_num_bytes = header_json.size();
  h.buffer_num_bytes = buffer_num_bytes;
  parse_header_json(header_json, source, &h);
  check_coverage(h.entries, buffer_num_bytes, source);
  return h;
}

}  // namespace ember
