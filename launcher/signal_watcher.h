// SignalWatcher: ember-run's signals as a file descriptor (signalfd) for its poll loop.
// Construct it first in main(), before any thread starts: it blocks SIGCHLD, SIGINT,
// SIGTERM, SIGHUP and SIGQUIT in the calling thread, and threads started later inherit
// that mask, so the signals are only ever read here. Children must restore
// original_mask() before exec (WorkerGroup does).
#pragma once
#include <signal.h>

namespace ember::launcher {

class SignalWatcher {
 public:
  SignalWatcher();
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  int fd() const { return fd_; }
  /// The next pending signal number, or 0 when none is pending (never blocks).
  int next();
  const sigset_t& original_mask() const { return original_mask_; }
  /// True for the signals ember-run forwards to its workers.
  static bool is_forwarded(int signo);

 private:
  int fd_ = -1;
  sigset_t original_mask_;
};

}  // namespace ember::launcher
