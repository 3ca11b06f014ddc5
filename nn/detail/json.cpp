#include "nn/detail/json.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace ember::nn::detail {

namespace {
class Parser {
 public:
  Parser(std::string_view s, const std::string& source) : s_(s), source_(source) {}

  JsonValue parse_all() {
    JsonValue v = value();
    ws();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    EMBER_THROW(ValueError, source_, ": malformed JSON (", what, " at offset ", i_, ")");
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool consume(std::string_view lit) {
    if (s_.substr(i_, lit.size()) == lit) {
      i_ += lit.size();
      return true;
    }
    return false;
  }
  JsonValue value() {
    ws();
    if (i_ >= s_.size()) fail("unexpected end");
    JsonValue v;
    char c = s_[i_];
    if (c == '{') {
      ++i_;
      v.kind = JsonValue::Kind::Object;
      ws();
      if (i_ < s_.size() && s_[i_] == '}') {
        ++i_;
        return v;
      }
      while (true) {
        ws();
        if (i_ >= s_.size() || s_[i_] != '"') fail("expected a key");
        std::string k = string();
        ws();
        if (i_ >= s_.size() || s_[i_] != ':') fail("expected ':'");
        ++i_;
        v.object.emplace_back(std::move(k), value());
        ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == '}') {
          ++i_;
          return v;
        }
        fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      ++i_;
      v.kind = JsonValue::Kind::Array;
      ws();
      if (i_ < s_.size() && s_[i_] == ']') {
        ++i_;
        return v;
      }
      while (true) {
        v.array.push_back(value());
        ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == ']') {
          ++i_;
          return v;
        }
        fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.kind = JsonValue::Kind::String;
      v.string = string();
      return v;
    }
    if (consume("true")) {
      v.kind = JsonValue::Kind::Bool;
      v.boolean = true;
      return v;
    }
    if (consume("false")) {
      v.kind = JsonValue::Kind::Bool;
      return v;
    }
    if (consume("null")) return v;
    v.kind = JsonValue::Kind::Number;
    if (consume("NaN")) {
      v.number = std::nan("");
      return v;
    }
    if (consume("Infinity")) {
      v.number = INFINITY;
      return v;
    }
    if (consume("-Infinity")) {
      v.number = -INFINITY;
      return v;
    }
    size_t start = i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' || s_[i_] == '+' ||
                              s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
    }
    if (start == i_) fail("unexpected character");
    std::string num(s_.substr(start, i_ - start));
    char* end = nullptr;
    v.number = std::strtod(num.c_str(), &end);
    if (end != num.c_str() + num.size()) fail("bad number");
    return v;
  }
  std::string string() {
    ++i_;  // opening quote
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("bad escape");
      char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (i_ + 4 > s_.size()) fail("bad \\u escape");
          unsigned cp = static_cast<unsigned>(std::strtoul(std::string(s_.substr(i_, 4)).c_str(), nullptr, 16));
          i_ += 4;
          // Basic Multilingual Plane only (what json_quote writes: control characters).
          if (cp < 0x80) {
            out += static_cast<char>(cp);
          } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          }
          break;
        }
        default: fail("bad escape");
      }
    }
    if (i_ >= s_.size()) fail("unterminated string");
    ++i_;
    return out;
  }

  std::string_view s_;
  const std::string& source_;
  size_t i_ = 0;
};
}  // namespace

const JsonValue* JsonValue::find(const std::string& key) const {
  for (const auto& [k, v] : object) {
    if (k == key) return &v;
  }
  return nullptr;
}

const JsonValue& JsonValue::at(const std::string& key, const std::string& what, std::string_view text) const {
  const JsonValue* v = find(key);
  if (v == nullptr) [[unlikely]] {
    if (text.empty()) EMBER_THROW(ValueError, what, ": missing key \"", key, "\"");
    EMBER_THROW(ValueError, what, ": missing key \"", key, "\" in ", text);
  }
  return *v;
}

double JsonValue::as_number(const std::string& what) const {
  EMBER_CHECK_T(ValueError, kind == Kind::Number, what, ": expected a number in JSON");
  return number;
}
int64_t JsonValue::as_int(const std::string& what) const {
  double v = as_number(what);
  EMBER_CHECK_T(ValueError, std::floor(v) == v, what, ": expected an integer in JSON, got ", v);
  return static_cast<int64_t>(v);
}
bool JsonValue::as_bool(const std::string& what) const {
  EMBER_CHECK_T(ValueError, kind == Kind::Bool, what, ": expected true or false in JSON");
  return boolean;
}
const std::string& JsonValue::as_string(const std::string& what) const {
  EMBER_CHECK_T(ValueError, kind == Kind::String, what, ": expected a string in JSON");
  return string;
}
std::vector<double> JsonValue::as_numbers(const std::string& what) const {
  EMBER_CHECK_T(ValueError, kind == Kind::Array, what, ": expected an array in JSON");
  std::vector<double> out;
  for (const auto& v : array) out.push_back(v.as_number(what));
  return out;
}

JsonValue parse_json(std::string_view text, const std::string& source) { return Parser(text, source).parse_all(); }

std::string json_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += "\"";
  return out;
}

void JsonObjectWriter::key(const std::string& k) {
  if (!body_.empty()) body_ += ",";
  body_ += json_quote(k);
  body_ += ":";
}
JsonObjectWriter& JsonObjectWriter::add(const std::string& k, double v) {
  key(k);
  body_ += json_number(v);
  return *this;
}
JsonObjectWriter& JsonObjectWriter::add(const std::string& k, int64_t v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}
JsonObjectWriter& JsonObjectWriter::add(const std::string& k, bool v) {
  key(k);
  body_ += v ? "true" : "false";
  return *this;
}
JsonObjectWriter& JsonObjectWriter::add(const std::string& k, const std::string& v) {
  key(k);
  body_ += json_quote(v);
  return *this;
}
JsonObjectWriter& JsonObjectWriter::add(const std::string& k, const std::vector<double>& v) {
  key(k);
  body_ += "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) body_ += ",";
    body_ += json_number(v[i]);
  }
  body_ += "]";
  return *this;
}
JsonObjectWriter& JsonObjectWriter::add(const std::string& k, const std::vector<int64_t>& v) {
  key(k);
  body_ += "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) body_ += ",";
    body_ += std::to_string(v[i]);
  }
  body_ += "]";
  return *this;
}
JsonObjectWriter& JsonObjectWriter::add_raw(const std::string& k, const std::string& json) {
  key(k);
  body_ += json;
  return *this;
}

}  // namespace ember::nn::detail
