// The ember exception hierarchy and the check macros every layer uses.
// EMBER_CHECK is for user mistakes (throws ember::Error or a typed subclass with file:line);
// EMBER_INTERNAL_ASSERT is for our own bugs. Library code never calls exit() or abort().
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include <cstdint>

namespace ember {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};
class ValueError : public Error { using Error::Error; };
class TypeError : public Error { using Error::Error; };
class IndexError : public Error { using Error::Error; };
class NotImplementedError : public Error { using Error::Error; };
class OutOfMemoryError : public Error { using Error::Error; };
class DistributedError : public Error { using Error::Error; };
class TimeoutError : public Error { using Error::Error; };

namespace detail {
inline void stream_arg(std::ostringstream& os, const std::vector<int64_t>& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ']';
}
template <typename T>
inline void stream_arg(std::ostringstream& os, const T& v) { os << v; }

template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (stream_arg(os, args), ...);
  return os.str();
}
template <typename E, typename... Args>
[[noreturn]] void throw_error(const char* file, int line, const Args&... args) {
  std::string msg = str_cat(args...);
  msg += " (";
  msg += file;
  msg += ":";
  msg += std::to_string(line);
  msg += ")";
  throw E(msg);
}
}  // namespace detail
}  // namespace ember

/// Throws ember::Error with the concatenated message when cond is false.
#define EMBER_CHECK(cond, ...)                                                      \
  do {                                                                              \
    if (!(cond)) [[unlikely]]                                                       \
      ::ember::detail::throw_error<::ember::Error>(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

/// As EMBER_CHECK, throwing the given subclass (ValueError, IndexError, ...).
#define EMBER_CHECK_T(ExcType, cond, ...)                                   \
  do {                                                                      \
    if (!(cond)) [[unlikely]]                                               \
      ::ember::detail::throw_error<ExcType>(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#define EMBER_THROW(ExcType, ...) ::ember::detail::throw_error<ExcType>(__FILE__, __LINE__, __VA_ARGS__)

#define EMBER_INTERNAL_ASSERT(cond, ...)                                                     \
  do {                                                                                       \
    if (!(cond)) [[unlikely]]                                                                \
      ::ember::detail::throw_error<::ember::Error>(                                          \
          __FILE__, __LINE__, "internal error (please report a bug): " #cond " ", ##__VA_ARGS__); \
  } while (0)
