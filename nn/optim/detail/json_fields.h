// The JSON of optimizer options and LR scheduler state (nlohmann-json): JsonFields reads one
// object's fields with ValueErrors that name the owner, the key and, for a missing key, the
// text. Doubles are written in the shortest form that reads back to the same bits; a
// non-finite value has no JSON number and is written as null, which reading refuses.
// Not installed (it includes nlohmann's header). Value type; thread-compatible.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ember::optim::detail {

/// Builds the JSON text; keys stay in the order written.
using JsonWriter = nlohmann::ordered_json;

class JsonFields {
 public:
  /// `owner` names the reader in errors ("SGD"), `object` what the text is ("options"); a missing
  /// key's error quotes the text when `quote_text`. Throws ValueError "<owner> <object>: malformed
  /// JSON (...)", or when the text is not an object.
  JsonFields(const std::string& text, std::string owner, const std::string& object, bool quote_text = true)
      : text_(quote_text ? " in " + text : std::string()), owner_(std::move(owner)), what_(owner_ + " " + object) {
    try {
      json_ = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      EMBER_THROW(ValueError, what_, ": malformed JSON (", e.what(), ")");
    }
    EMBER_CHECK_T(ValueError, json_.is_object(), what_, ": expected a JSON object, got ", json_.dump());
  }

  bool has(const std::string& key) const { return json_.contains(key); }

  double number(const std::string& key) const {
    const auto& v = at(key);
    EMBER_CHECK_T(ValueError, v.is_number(), owner_, " ", key, ": expected a number in JSON, got ", v.dump());
    return v.get<double>();
  }
  int64_t integer(const std::string& key) const {
    const auto& v = at(key);
    EMBER_CHECK_T(ValueError, v.is_number_integer(), owner_, " ", key, ": expected an integer in JSON, got ", v.dump());
    return v.get<int64_t>();
  }
  bool boolean(const std::string& key) const {
    const auto& v = at(key);
    EMBER_CHECK_T(ValueError, v.is_boolean(), owner_, " ", key, ": expected true or false in JSON, got ", v.dump());
    return v.get<bool>();
  }
  std::vector<double> numbers(const std::string& key) const {
    const auto& v = at(key);
    EMBER_CHECK_T(ValueError, v.is_array(), owner_, " ", key, ": expected an array in JSON, got ", v.dump());
    std::vector<double> out;
    for (const auto& x : v) {
      EMBER_CHECK_T(ValueError, x.is_number(), owner_, " ", key, ": expected numbers in JSON, got ", v.dump());
      out.push_back(x.get<double>());
    }
    return out;
  }

 private:
  const nlohmann::json& at(const std::string& key) const {
    const auto it = json_.find(key);
    EMBER_CHECK_T(ValueError, it != json_.end(), what_, ": missing key \"", key, "\"", text_);
    return *it;
  }

  std::string text_;  // " in <text>", or "" when not quoted
  std::string owner_;
  std::string what_;
  nlohmann::json json_;
};

}  // namespace ember::optim::detail
