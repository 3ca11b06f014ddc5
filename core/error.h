// The ember exception hierarchy and the check macros every layer uses.
// EMBER_CHECK is for user mistakes (throws ember::Error or a typed subclass); EMBER_INTERNAL_ASSERT
// is for our own bugs. Library code never calls exit() or abort(). See Note [Error messages].
#pragma once
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember {

// Note [Error messages]
// what() is the message a user needs: what the op expected and what arrived, nothing about
// where in ember's sources the check sits. The check's location ("file:line:function") is kept
// apart in Error::where(), and what() ends with " (at <where>)" only when the environment
// variable EMBER_SHOW_CPP_STACKTRACES is 1, read once per process (show_cpp_stacktraces()).
// The file is relative to ember's root ("core/tensor.cpp", "tests/core/error_test.cpp"), never
// a path of the build machine: EMBER_SOURCE_FILE strips from __FILE__ the part before "core/"
// in the path under which the same translation unit reached this header (kErrorHeaderPath), so
// it holds for a checkout, a build through ccache (which makes paths relative) and the
// installed headers alike. (-fmacro-prefix-map would do it at compile time, but ccache 4.7
// leaves that flag out of its hash and hands back objects built without it.) Code that
// re-raises an error with more context (the autograd engine naming the node) builds the new
// text from message() and passes where() on, so the location stays the original check's.

/// Whether EMBER_SHOW_CPP_STACKTRACES=1 (any value but empty or "0"); read at the first call.
inline bool show_cpp_stacktraces() {
  static const bool show = [] {
    const char* v = std::getenv("EMBER_SHOW_CPP_STACKTRACES");
    return v != nullptr && *v != '\0' && std::string_view(v) != "0";
  }();
  return show;
}

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : Error(msg, std::string()) {}
  /// `where`: "file:line:function" of the check that failed, "" when not known.
  Error(const std::string& msg, std::string where)
      : std::runtime_error(show_cpp_stacktraces() && !where.empty() ? msg + " (at " + where + ")" : msg),
        message_(msg),
        where_(std::move(where)) {}
  /// The message without the source location, whatever EMBER_SHOW_CPP_STACKTRACES says.
  const std::string& message() const noexcept { return message_; }
  /// "file:line:function" of the check that raised this error; "" when not known.
  const std::string& where() const noexcept { return where_; }

 private:
  std::string message_;
  std::string where_;
};
class ValueError : public Error { using Error::Error; };
class TypeError : public Error { using Error::Error; };
class IndexError : public Error { using Error::Error; };
class NotImplementedError : public Error { using Error::Error; };
class OutOfMemoryError : public Error { using Error::Error; };
class DistributedError : public Error { using Error::Error; };
class TimeoutError : public Error { using Error::Error; };
/// A device the operation needs is not there (no CUDA device visible, ember built without CUDA,
/// an index past the devices that exist). See check_device_exists (core/device.h).
class DeviceError : public Error { using Error::Error; };

/// Every subclass above with its ErrorCode name (core/error_code.h), so carrying an error across a
/// thread or process keeps its type. A new ember error type derives from Error directly and
/// joins this list, which is what carries it across a boundary with its type.
#define EMBER_FORALL_ERROR_SUBCLASSES(_) \
  _(ValueError, kValue)                  \
  _(TypeError, kType)                    \
  _(IndexError, kIndex)                  \
  _(NotImplementedError, kNotImplemented) \
  _(OutOfMemoryError, kOutOfMemory)      \
  _(DistributedError, kDistributed)      \
  _(TimeoutError, kTimeout)              \
  _(DeviceError, kDevice)

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
// This header's path as the current translation unit's compiler spells it: internal linkage on
// purpose, each translation unit keeps its own spelling. See Note [Error messages].
static constexpr std::string_view kErrorHeaderPath = __FILE__;

/// `file` (a __FILE__) relative to the folder that holds core/error.h in `error_header`;
/// `file` itself when it lies elsewhere.
inline const char* path_from_root(const char* file, std::string_view error_header) {
  constexpr std::string_view tail = "core/error.h";
  if (!error_header.ends_with(tail)) return file;
  const std::string_view root = error_header.substr(0, error_header.size() - tail.size());
  return std::string_view(file).starts_with(root) ? file + root.size() : file;
}

/// "file:line:function" (function omitted when null or empty).
inline std::string source_location_text(const char* file, int line, const char* function) {
  std::string where = std::string(file) + ":" + std::to_string(line);
  if (function != nullptr && *function != '\0') where += std::string(":") + function;
  return where;
}
template <typename E, typename... Args>
[[noreturn]] void throw_error_at(const char* file, int line, const char* function, const Args&... args) {
  throw E(str_cat(args...), source_location_text(file, line, function));
}
/// As throw_error_at, for callers that know no function name (the CUDA/MPI/NCCL checks).
template <typename E, typename... Args>
[[noreturn]] void throw_error(const char* file, int line, const Args&... args) {
  throw_error_at<E>(file, line, nullptr, args...);
}
}  // namespace detail
}  // namespace ember

/// __FILE__ relative to ember's root (Note [Error messages]), for a check's Error::where().
#define EMBER_SOURCE_FILE ::ember::detail::path_from_root(__FILE__, ::ember::detail::kErrorHeaderPath)

/// Throws ember::Error with the concatenated message when cond is false.
#define EMBER_CHECK(cond, ...)                                                      \
  do {                                                                              \
    if (!(cond)) [[unlikely]]                                                       \
      ::ember::detail::throw_error_at<::ember::Error>(EMBER_SOURCE_FILE, __LINE__, __func__, __VA_ARGS__); \
  } while (0)

/// As EMBER_CHECK, throwing the given subclass (ValueError, IndexError, ...).
#define EMBER_CHECK_T(ExcType, cond, ...)                                   \
  do {                                                                      \
    if (!(cond)) [[unlikely]]                                               \
      ::ember::detail::throw_error_at<ExcType>(EMBER_SOURCE_FILE, __LINE__, __func__, __VA_ARGS__); \
  } while (0)

#define EMBER_THROW(ExcType, ...) ::ember::detail::throw_error_at<ExcType>(EMBER_SOURCE_FILE, __LINE__, __func__, __VA_ARGS__)

#define EMBER_INTERNAL_ASSERT(cond, ...)                                                     \
  do {                                                                                       \
    if (!(cond)) [[unlikely]]                                                                \
      ::ember::detail::throw_error_at<::ember::Error>(                                       \
          EMBER_SOURCE_FILE, __LINE__, __func__, "internal error (please report a bug): " #cond " ", ##__VA_ARGS__); \
  } while (0)
