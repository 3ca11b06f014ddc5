// A small JSON reader/writer for the hyper-parameters and indices that optimizers, LR
// schedulers and checkpoints keep in safetensors "__metadata__" strings. Numbers are written
// with 17 significant digits, so doubles round-trip bit-exactly; Infinity/NaN are accepted and
// written as Python's json module does. Value types; thread-compatible.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::nn::detail {

struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  // User-provided: clang 14 (the fuzz build) with libstdc++ 12 cannot check pair<string,
  // JsonValue>'s default constructor while JsonValue is incomplete if this one is implicit.
  JsonValue() {}
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0.0;
  std::string string;
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;

  /// Member lookup on an object; null when absent (or not an object).
  const JsonValue* find(const std::string& key) const;
  /// Member lookup that must succeed: throws ValueError `<what>: missing key "<key>"`, followed
  /// by ` in <text>` when `text` (the JSON this was parsed from) is given.
  const JsonValue& at(const std::string& key, const std::string& what, std::string_view text = {}) const;
  /// Typed accessors; throw ValueError naming `what` on a kind mismatch.
  double as_number(const std::string& what) const;
  int64_t as_int(const std::string& what) const;
  bool as_bool(const std::string& what) const;
  const std::string& as_string(const std::string& what) const;
  std::vector<double> as_numbers(const std::string& what) const;
};

/// Parses one JSON value (the whole text). Throws ValueError naming `source` when malformed.
JsonValue parse_json(std::string_view text, const std::string& source);

std::string json_number(double v);
std::string json_quote(const std::string& s);

/// Builds a flat JSON object in insertion order.
class JsonObjectWriter {
 public:
  JsonObjectWriter& add(const std::string& key, double v);
  JsonObjectWriter& add(const std::string& key, int64_t v);
  JsonObjectWriter& add(const std::string& key, bool v);
  JsonObjectWriter& add(const std::string& key, const std::string& v);
  JsonObjectWriter& add(const std::string& key, const std::vector<double>& v);
  JsonObjectWriter& add(const std::string& key, const std::vector<int64_t>& v);
  /// `json` must already be valid JSON text.
  JsonObjectWriter& add_raw(const std::string& key, const std::string& json);
  std::string str() const {
    std::string s = "{";
    s += body_;
    s += "}";
    return s;
  }

 private:
  void key(const std::string& k);
  std::string body_;
};

}  // namespace ember::nn::detail
