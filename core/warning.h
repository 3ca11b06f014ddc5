// ember's warnings: one line "ember: warning: <message>" on stderr, or to a handler a program or
// test installs (as c10's WarningHandler). Library code warns only through this, never with a raw
// fprintf(stderr). EMBER_WARN_ONCE warns the first time its line runs in the process.
// Thread-safe: a line is written whole; the handler is called under a mutex.
#pragma once
#include <functional>
#include <string>

#include "core/error.h"

namespace ember {

/// Receives each warning's message (without the "ember: warning: " prefix).
using WarningHandler = std::function<void(const std::string& message)>;

/// Warns: the handler if one is set, else one line on stderr.
void warn(const std::string& message);

/// Installs `handler` (an empty one restores stderr) and returns the previous one.
WarningHandler set_warning_handler(WarningHandler handler);

}  // namespace ember

/// Warns with the concatenated message (the arguments of EMBER_CHECK).
#define EMBER_WARN(...) ::ember::warn(::ember::detail::str_cat(__VA_ARGS__))

/// As EMBER_WARN, only the first time this line runs in the process.
#define EMBER_WARN_ONCE(...)                                                                 \
  do {                                                                                       \
    [[maybe_unused]] static const bool ember_warned_once_ = (EMBER_WARN(__VA_ARGS__), true); \
  } while (0)
