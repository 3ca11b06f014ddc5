// ember's environment variables, read one way: a variable set to "" is the same as one not
// set; a switch takes 1/0 (or true/false, on/off, yes/no, any case); a choice takes one of a
// fixed list; an integer takes a decimal in a range. Any other value is a ValueError naming the
// variable, the values it accepts and what it holds. EMBER_SHOW_CPP_STACKTRACES alone is read in
// core/error.h, which must not throw: any value but "" or "0" turns it on. Reads getenv at each
// call (callers wanting one value per process keep it in a static); thread-safe while nothing
// calls setenv.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace ember::env {

/// The variable's value; nullopt when it is not set or is "".
std::optional<std::string> get(const char* name);

/// An on/off switch; `default_value` when not set. Throws ValueError for any other value.
bool flag(const char* name, bool default_value);

/// One of `choices` (exact spelling); `default_value` when not set. Throws ValueError naming
/// the choices for any other value.
std::string choice(const char* name, std::initializer_list<std::string_view> choices,
                   std::string_view default_value);

/// A decimal integer in [lo, hi]; nullopt when not set. Throws ValueError otherwise.
std::optional<int64_t> integer(const char* name, int64_t lo, int64_t hi);

/// What flag() makes of `value`; nullopt when it is not a switch's value.
std::optional<bool> parse_flag(std::string_view value);

}  // namespace ember::env
