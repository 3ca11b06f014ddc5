#include "launcher/signal_watcher.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ember::launcher {

SignalWatcher::SignalWatcher() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, s);
  if (::pthread_sigmask(SIG_BLOCK, &set, &original_mask_) != 0)
    throw std::runtime_error("cannot block signals");
  fd_ = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) throw std::runtime_error(std::string("signalfd failed: ") + std::strerror(errno));
}

SignalWatcher::~SignalWatcher() {
  ::close(fd_);
  ::pthread_sigmask(SIG_SETMASK, &original_mask_, nullptr);
}

int SignalWatcher::next() {
  signalfd_siginfo info;
  while (true) {
    ssize_t n = ::read(fd_, &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) return static_cast<int>(info.ssi_signo);
    if (n < 0 && errno == EINTR) continue;
    return 0;
  }
}

bool SignalWatcher::is_forwarded(int signo) {
  return signo == SIGINT || signo == SIGTERM || signo == SIGHUP || signo == SIGQUIT;
}

}  // namespace ember::launcher
