#include "core/detail/memory_limit.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/env.h"
#include "core/error.h"

namespace ember::detail {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

[[noreturn]] void bad_limit_entry(std::string_view entry, const std::string& why) {
  EMBER_THROW(ValueError, kMemoryLimitEnv, ": bad entry '", std::string(entry), "' (", why,
              "); expected comma-separated entries like 'cpu:0=64MB', 'cpu=1GB', 'cuda:1=8GB' "
              "with units B, KB, MB or GB");
}

// Parses "64MB", "1.5GB", "4096" (bytes) into bytes.
int64_t parse_bytes(std::string_view entry, std::string_view s) {
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  std::string number(s.substr(0, i));
  if (number.empty() || std::count(number.begin(), number.end(), '.') > 1 || number == ".")
    bad_limit_entry(entry, "missing or malformed number");
  std::string unit(trim(s.substr(i)));
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double scale;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "KB" || unit == "KIB" || unit == "K") scale = 1024.0;
  else if (unit == "MB" || unit == "MIB" || unit == "M") scale = 1024.0 * 1024.0;
  else if (unit == "GB" || unit == "GIB" || unit == "G") scale = 1024.0 * 1024.0 * 1024.0;
  else bad_limit_entry(entry, "unknown unit");
  double value = std::strtod(number.c_str(), nullptr) * scale;
  if (!(value >= 0) || value > 9.0e18) bad_limit_entry(entry, "value out of range");
  return static_cast<int64_t>(value);
}

// The device (index -1 for a type-wide entry) an entry's left side names, through Device's parser.
Device entry_device(std::string_view entry, std::string_view dev) {
  try {
    Device d{dev};
    if (dev.find(':') == std::string_view::npos) d.index = -1;
    return d;
  } catch (const ValueError& e) {
    bad_limit_entry(entry, e.message());
  }
}

}  // namespace

int64_t memory_limit_from_env(Device device) {
  const auto env = env::get(kMemoryLimitEnv);
  if (!env) return 0;
  int64_t type_limit = 0, index_limit = 0;
  bool have_type = false, have_index = false;
  std::string_view rest(*env);
  while (true) {
    size_t comma = rest.find(',');
    std::string_view entry = trim(rest.substr(0, comma));
    if (!entry.empty()) {
      size_t eq = entry.find('=');
      if (eq == std::string_view::npos) bad_limit_entry(entry, "missing '='");
      const Device named = entry_device(entry, trim(entry.substr(0, eq)));
      int64_t bytes = parse_bytes(entry, trim(entry.substr(eq + 1)));
      if (named.type == device.type) {
        if (named.index < 0) {
          type_limit = bytes;
          have_type = true;
        } else if (named.index == device.index) {
          index_limit = bytes;
          have_index = true;
        }
      }
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return have_index ? index_limit : (have_type ? type_limit : 0);
}

}  // namespace ember::detail
