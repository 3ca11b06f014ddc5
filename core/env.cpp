#include "core/env.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "core/error.h"

namespace ember::env {

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::optional<bool> parse_flag(std::string_view value) {
  std::string lower(value);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "1" || lower == "true" || lower == "on" || lower == "yes") return true;
  if (lower == "0" || lower == "false" || lower == "off" || lower == "no") return false;
  return std::nullopt;
}

bool flag(const char* name, bool default_value) {
  const auto v = get(name);
  if (!v) return default_value;
  const auto on = parse_flag(*v);
  EMBER_CHECK_T(ValueError, on.has_value(), name, ": expected 1 or 0 (true/false, on/off, yes/no), got '", *v, "'");
  return *on;
}

std::string choice(const char* name, std::initializer_list<std::string_view> choices,
                   std::string_view default_value) {
  const auto v = get(name);
  if (!v) return std::string(default_value);
  std::string listed;
  size_t i = 0;
  for (std::string_view c : choices) {
    if (*v == c) return *v;
    listed += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + std::string(c);
    ++i;
  }
  EMBER_THROW(ValueError, name, ": expected ", listed, ", got '", *v, "'");
}

std::optional<int64_t> integer(const char* name, int64_t lo, int64_t hi) {
  const auto v = get(name);
  if (!v) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v->c_str(), &end, 10);
  EMBER_CHECK_T(ValueError, errno == 0 && end != v->c_str() && *end == '\0' && x >= lo && x <= hi, name,
                ": expected an integer in [", lo, ", ", hi, "], got '", *v, "'");
  return static_cast<int64_t>(x);
}

}  // namespace ember::env
