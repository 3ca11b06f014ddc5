// RankCgroups: a cgroup v2 per worker, so that stopping a worker also stops what it started
// even after that left the worker's process group (setsid). See Note [Rank cgroups] in
// cgroup.cpp. Where cgroup v2 is not mounted or this process may not create cgroups below
// its own, available() is false and why_not() says why; ember-run says so once at start-up.
// Used from main()'s thread; join() is for a freshly forked child.
#pragma once
#include <string>

namespace ember::launcher {

class RankCgroups {
 public:
  /// Probes cgroup v2 and creates "ember-run.<pid>" below this process's cgroup. Never throws.
  RankCgroups();
  /// Kills whatever is still in the cgroups and removes them.
  ~RankCgroups();
  RankCgroups(const RankCgroups&) = delete;
  RankCgroups& operator=(const RankCgroups&) = delete;

  bool available() const { return !root_.empty(); }
  const std::string& why_not() const { return why_not_; }
  /// The directory of ember-run's own cgroup, parent of every worker's ("" when unavailable).
  const std::string& root() const { return root_; }

  /// Creates the cgroup for one worker start ("rank-<r>.<n>") and returns its directory, or ""
  /// when unavailable or the directory cannot be made.
  std::string make(int rank);
  /// SIGKILLs every process in the cgroup `dir` (and below), waits up to 2 s for it to empty,
  /// and removes it. Safe to call for "" (does nothing).
  static void kill_and_remove(const std::string& dir);

  /// In a child between fork and exec: moves the calling process into the cgroup whose
  /// cgroup.procs is `procs_path`. Async-signal-safe; false when the kernel refused.
  static bool join(const char* procs_path);

 private:
  std::string root_;
  std::string why_not_;
  int made_ = 0;
};

}  // namespace ember::launcher
