// Guardian: a small process ember-run forks before anything else, whose only job is to
// outlive it. Every worker registers its process group with the guardian (between fork and
// exec); when ember-run's end of the pipe between them closes (ember-run returned, or died
// of anything, SIGKILL included) the guardian SIGKILLs every group still registered and
// exits. Workers die with ember-run through their parent-death signal, but what they
// started would not: see Note [Guardian] in guardian.cpp. Used from main()'s thread only;
// register_self() is async-signal-safe.
#pragma once
#include <sys/types.h>

#include <string>

namespace ember::launcher {

class Guardian {
 public:
  /// Forks the guardian. Call it before any thread starts. Throws std::runtime_error when
  /// pipe() or fork() fails. With a cgroup directory (RankCgroups::root()), the guardian
  /// also kills and removes that cgroup when ember-run is gone.
  explicit Guardian(std::string cgroup = "");
  /// Closes the pipe and waits for the guardian, so every group still registered is gone
  /// when this returns.
  ~Guardian();
  Guardian(const Guardian&) = delete;
  Guardian& operator=(const Guardian&) = delete;

  /// The descriptor a freshly forked worker passes to register_self() (close-on-exec).
  int fd() const { return fd_; }
  /// In a worker between fork and exec, after setpgid(0, 0): registers the calling
  /// process's group. Async-signal-safe; errors are ignored.
  static void register_self(int fd);
  /// ember-run has SIGKILLed group `pgid` itself and reaped its leader: the guardian drops
  /// it, so that a number the kernel may hand out again is never signalled.
  void forget(pid_t pgid);
  pid_t pid() const { return pid_; }

 private:
  int fd_ = -1;
  pid_t pid_ = -1;
};

}  // namespace ember::launcher
