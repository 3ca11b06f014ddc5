// WorkerGroup: this node's workers for one attempt. start() forks and execs one process
// per local rank with the torchrun environment, each in its own process group with its
// stdout/stderr on pipes; monitor() pumps their output through LinePrefixers and waits
// (signalfd + poll, no busy loop) until all succeed, one fails, or ember-run is signalled;
// stop() brings the rest down (a signal, then SIGKILL after the grace period) and reaps
// them. Used from main()'s thread only.
// Workers also get TORCHELASTIC_USE_AGENT_STORE=True and EMBER_USE_AGENT_STORE=1: the store
// at MASTER_ADDR:MASTER_PORT is ember-run's, so rank 0 must connect to it as a client.
#pragma once
#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "launcher/cgroup.h"
#include "launcher/guardian.h"
#include "launcher/launch_options.h"
#include "launcher/line_prefixer.h"
#include "launcher/signal_watcher.h"

namespace ember::launcher {

/// What this attempt's workers get besides their ranks.
struct GroupEnv {
  std::string master_addr;
  int master_port = 0;
  std::string token;
  int restart_count = 0;
};

/// How one worker ended.
struct WorkerExit {
  int rank = -1;
  int local_rank = -1;
  pid_t pid = -1;
  bool signaled = false;
  int exit_code = 0;  // when !signaled
  int signal = 0;     // when signaled

  /// ember-run's exit code for this failure: the code, or 128 + signal.
  int launcher_exit_code() const { return signaled ? 128 + signal : exit_code; }
  /// "rank 1 (pid 1234) exited with code 3" / "... was killed by signal 9 (SIGKILL)".
  std::string describe() const;
};

struct GroupResult {
  enum Outcome { kSucceeded, kWorkerFailed, kInterrupted } outcome = kSucceeded;
  WorkerExit failure;  // kWorkerFailed: the first seen failing (of several at once: one killed by a signal)
  int signal = 0;      // kInterrupted: the signal ember-run received and forwarded
};

/// The program could not be started (not found, not executable).
class LaunchError : public ember::Error {
 public:
  explicit LaunchError(const std::string& message) : ember::Error(message) {}
};

class WorkerGroup {
 public:
  /// With a guardian, every worker registers its process group there (see Note [Guardian]).
  /// With cgroups (available), every worker starts in a cgroup of its own, which stop()
  /// kills (Note [Rank cgroups]).
  WorkerGroup(const LaunchOptions& options, SignalWatcher& signals, Guardian* guardian = nullptr,
              RankCgroups* cgroups = nullptr);
  /// Kills and reaps whatever is still running.
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  /// Starts every local worker, finding the program on PATH as execvp does. Throws LaunchError
  /// (after stopping any already started) when exec fails: not found, not executable.
  void start(const GroupEnv& env);
  /// Returns at the first failure not yet handled (--ft: respawn() or abandon() handles it),
  /// when every worker is done, or when ember-run is signalled. `on_round` (may be empty) runs
  /// once per round of waiting, at least every monitor_interval_ms.
  GroupResult monitor(const std::function<void()>& on_round = {});
  // ---- --ft: one worker at a time -------------------------------------------------------------
  /// Starts a replacement for the failed worker of `local_rank` (same rank, next incarnation:
  /// EMBER_FT_INCARNATION); its output continues under the same prefix and log file.
  void respawn(int local_rank, const GroupEnv& env);
  /// Leaves the failed worker of `local_rank` down: monitor() no longer reports it.
  void abandon(int local_rank);
  /// SIGKILLs the worker of `local_rank` when it still runs as `incarnation`; returns whether it did.
  bool kill_worker(int local_rank, int64_t incarnation);
  /// The running (or last) incarnation of `local_rank`'s worker.
  int64_t incarnation(int local_rank) const;
  /// --ft over several nodes: where each start and respawn takes its worker's incarnation (given
  /// the rank), so that a node's ember-run started again never reuses an incarnation of the one
  /// before it. Unset: 0 at start(), one more at each respawn().
  void set_incarnation_source(std::function<int64_t(int rank)> next) { next_incarnation_ = std::move(next); }
  /// Whether any worker exited with code 0.
  bool any_succeeded() const;
  /// Sends first_signal (0: none, e.g. it was already forwarded) to every live worker,
  /// SIGKILL after options.stop_timeout_ms, reaps all and flushes their output. A
  /// forwarded signal arriving meanwhile escalates to SIGKILL at once and is remembered
  /// in interrupted_by().
  void stop(int first_signal);
  /// The forwarded signal ember-run received during the last monitor()/stop(), or 0.
  int interrupted_by() const { return interrupted_by_; }

 private:
  struct Worker;
  void spawn(Worker& w, const GroupEnv& env);
  std::vector<std::string> worker_environment(const Worker& w, const GroupEnv& env) const;
  // Opens w's log file (--log-dir): truncated at the first start, with a banner after that.
  void open_log(Worker& w, int restart_count);
  // One round of waiting: poll the pipes and the signal fd up to timeout_ms, pump output,
  // reap exited workers. Returns a forwarded signal received (0 if none).
  int wait_round(int64_t timeout_ms);
  void pump(Worker& w, int& fd, LinePrefixer& sink);
  void reap();
  void drain_pipes(int64_t timeout_ms);
  void signal_live(int signo);
  bool any_live() const;
  // The failed worker to report, or nullptr (see Note [Which failure is reported]).
  const Worker* first_failure() const;
  // How long a failure by exit code waits for a peer's signal death to be reapable.
  static constexpr int64_t kCauseGraceMs = 300;

  const LaunchOptions& options_;
  SignalWatcher& signals_;
  Guardian* guardian_;
  RankCgroups* cgroups_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::function<int64_t(int rank)> next_incarnation_;
  int interrupted_by_ = 0;
};

}  // namespace ember::launcher
