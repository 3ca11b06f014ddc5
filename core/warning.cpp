#include "core/warning.h"

#include <cstdio>
#include <mutex>

namespace ember {

namespace {

std::mutex g_mu;
WarningHandler g_handler;  // guarded by g_mu

}  // namespace

void warn(const std::string& message) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_handler) {
    g_handler(message);
    return;
  }
  const std::string line = "ember: warning: " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

WarningHandler set_warning_handler(WarningHandler handler) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::swap(g_handler, handler);
  return handler;
}

}  // namespace ember
