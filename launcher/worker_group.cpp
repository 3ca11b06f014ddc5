#include "launcher/worker_group.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/cpu_affinity.h"
#include "core/fd_io.h"

extern char** environ;

namespace ember::launcher {

namespace {

using Clock = std::chrono::steady_clock;

// Environment variables ember-run owns; inherited values are replaced.
const char* const kOwnedVars[] = {
    "RANK",          "WORLD_SIZE",        "LOCAL_RANK",  "LOCAL_WORLD_SIZE",
    "GROUP_RANK",    "GROUP_WORLD_SIZE",  "ROLE_RANK",   "ROLE_WORLD_SIZE",
    "MASTER_ADDR",   "MASTER_PORT",       "EMBER_STORE_TOKEN",
    "TORCHELASTIC_RESTART_COUNT",         "EMBER_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",          "EMBER_MAX_RESTARTS",
    "TORCHELASTIC_USE_AGENT_STORE",       "EMBER_USE_AGENT_STORE",
    "EMBER_FT", "EMBER_FT_TIMEOUT_MS", "EMBER_FT_MIN_RANKS", "EMBER_FT_QUORUM_TIMEOUT_MS", "EMBER_FT_INCARNATION",
};

bool is_owned(const char* entry) {
  for (const char* name : kOwnedVars) {
    const size_t n = std::strlen(name);
    if (std::strncmp(entry, name, n) == 0 && entry[n] == '=') return true;
  }
  return false;
}

std::string signal_name(int signo) {
  const char* abbrev = ::sigabbrev_np(signo);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signo);
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace

std::string WorkerExit::describe() const {
  std::string s = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
  if (signaled) return s + " was killed by signal " + std::to_string(signal) + " (" + signal_name(signal) + ")";
  return s + " exited with code " + std::to_string(exit_code);
}

struct WorkerGroup::Worker {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int out_fd = -1;  // read ends of the worker's stdout/stderr pipes; -1 once at EOF
  int err_fd = -1;
  int log_fd = -1;
  std::unique_ptr<LinePrefixer> out;
  std::unique_ptr<LinePrefixer> err;
  WorkerExit exit;
  bool exited = false;
  bool handled = false;     // --ft: a failure already respawned or abandoned
  int64_t incarnation = 0;  // --ft: how many times this rank was replaced
  std::string cgroup;  // its cgroup's directory, "" without one
};

WorkerGroup::WorkerGroup(const LaunchOptions& options, SignalWatcher& signals, Guardian* guardian,
                         RankCgroups* cgroups)
    : options_(options), signals_(signals), guardian_(guardian), cgroups_(cgroups) {}

WorkerGroup::~WorkerGroup() {
  if (any_live()) {
    signal_live(SIGKILL);
    for (auto& w : workers_)
      if (w->running) {
        int status;
        while (::waitpid(w->pid, &status, 0) < 0 && errno == EINTR) {
        }
        w->running = false;
      }
  }
  for (auto& w : workers_) {
    RankCgroups::kill_and_remove(w->cgroup);
    close_fd(w->out_fd);
    close_fd(w->err_fd);
    close_fd(w->log_fd);
  }
}

std::vector<std::string> WorkerGroup::worker_environment(const Worker& w, const GroupEnv& env) const {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e)
    if (!is_owned(*e)) out.emplace_back(*e);
  auto put = [&](const char* name, const std::string& value) { out.push_back(std::string(name) + "=" + value); };
  const std::string world = std::to_string(options_.world_size());
  const std::string local_world = std::to_string(options_.nproc_per_node);
  put("RANK", std::to_string(w.rank));
  put("WORLD_SIZE", world);
  put("LOCAL_RANK", std::to_string(w.local_rank));
  put("LOCAL_WORLD_SIZE", local_world);
  put("GROUP_RANK", std::to_string(options_.node_rank));
  put("GROUP_WORLD_SIZE", std::to_string(options_.nnodes));
  put("ROLE_RANK", std::to_string(w.rank));
  put("ROLE_WORLD_SIZE", world);
  put("MASTER_ADDR", env.master_addr);
  put("MASTER_PORT", std::to_string(env.master_port));
  put("EMBER_STORE_TOKEN", env.token);
  put("TORCHELASTIC_RESTART_COUNT", std::to_string(env.restart_count));
  put("EMBER_RESTART_COUNT", std::to_string(env.restart_count));
  put("TORCHELASTIC_MAX_RESTARTS", std::to_string(options_.max_restarts));
  put("EMBER_MAX_RESTARTS", std::to_string(options_.max_restarts));
  // The store at MASTER_ADDR:MASTER_PORT is hosted by ember-run on node 0, so no rank (not
  // even rank 0) may start its own server there; torchrun says so with the same variable.
  put("TORCHELASTIC_USE_AGENT_STORE", "True");
  put("EMBER_USE_AGENT_STORE", "1");
  if (options_.ft) {  // see parallel/ft/keys.h
    put("EMBER_FT", "1");
    put("EMBER_FT_TIMEOUT_MS", std::to_string(options_.ft_timeout_ms));
    put("EMBER_FT_MIN_RANKS", std::to_string(options_.ft_min_ranks));
    put("EMBER_FT_QUORUM_TIMEOUT_MS", std::to_string(options_.ft_quorum_timeout_ms));
    put("EMBER_FT_INCARNATION", std::to_string(w.incarnation));
  }
  if (!options_.local_addr.empty()) {  // --local-addr replaces an inherited EMBER_TCP_HOST
    std::erase_if(out, [](const std::string& e) { return e.rfind("EMBER_TCP_HOST=", 0) == 0; });
    put("EMBER_TCP_HOST", options_.local_addr);
  }
  return out;
}

void WorkerGroup::start(const GroupEnv& env) {
  for (auto& w : workers_) {
    close_fd(w->out_fd);
    close_fd(w->err_fd);
    close_fd(w->log_fd);
  }
  workers_.clear();
  interrupted_by_ = 0;
  for (int lr = 0; lr < options_.nproc_per_node; ++lr) {
    auto w = std::make_unique<Worker>();
    w->local_rank = lr;
    w->rank = options_.node_rank * options_.nproc_per_node + lr;
    if (next_incarnation_) w->incarnation = next_incarnation_(w->rank);
    open_log(*w, env.restart_count);
    const std::string prefix = "[rank " + std::to_string(w->rank) + "]: ";
    w->out = std::make_unique<LinePrefixer>(prefix, STDOUT_FILENO, w->log_fd);
    w->err = std::make_unique<LinePrefixer>(prefix, STDERR_FILENO, w->log_fd);
    workers_.push_back(std::move(w));
    try {
      spawn(*workers_.back(), env);
    } catch (...) {
      stop(SIGKILL);
      throw;
    }
  }
}

void WorkerGroup::open_log(Worker& w, int restart_count) {
  if (options_.log_dir.empty()) return;
  const std::string path = options_.log_dir + "/rank_" + std::to_string(w.rank) + ".log";
  const bool first = restart_count == 0 && w.incarnation == 0;
  const int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (first ? O_TRUNC : 0);
  w.log_fd = ::open(path.c_str(), flags, 0644);
  if (w.log_fd < 0) throw LaunchError("cannot open log file '" + path + "': " + std::strerror(errno));
  if (!first) {
    const std::string banner = w.incarnation > 0
                                   ? "--- ember-run: replacement (incarnation " + std::to_string(w.incarnation) + ") ---\n"
                                   : "--- ember-run: restart " + std::to_string(restart_count) + " ---\n";
    io::write_full(w.log_fd, banner.data(), banner.size());
  }
}

void WorkerGroup::respawn(int local_rank, const GroupEnv& env) {
  Worker* w = nullptr;
  for (auto& x : workers_)
    if (x->local_rank == local_rank) w = x.get();
  if (w == nullptr || w->running) throw LaunchError("respawn: local rank " + std::to_string(local_rank) + " is not down");
  if (guardian_) guardian_->forget(w->pid);
  RankCgroups::kill_and_remove(w->cgroup);
  w->cgroup.clear();
  w->out->finish();
  w->err->finish();
  close_fd(w->out_fd);
  close_fd(w->err_fd);
  close_fd(w->log_fd);
  w->incarnation = next_incarnation_ ? next_incarnation_(w->rank) : w->incarnation + 1;
  w->exited = false;
  w->handled = false;
  w->exit = WorkerExit{};
  open_log(*w, env.restart_count);
  const std::string prefix = "[rank " + std::to_string(w->rank) + "]: ";
  w->out = std::make_unique<LinePrefixer>(prefix, STDOUT_FILENO, w->log_fd);
  w->err = std::make_unique<LinePrefixer>(prefix, STDERR_FILENO, w->log_fd);
  spawn(*w, env);
}

void WorkerGroup::abandon(int local_rank) {
  for (auto& w : workers_)
    if (w->local_rank == local_rank && w->exited) w->handled = true;
}

bool WorkerGroup::kill_worker(int local_rank, int64_t incarnation) {
  for (auto& w : workers_) {
    if (w->local_rank != local_rank || !w->running || w->incarnation != incarnation) continue;
    ::kill(-w->pid, SIGKILL);
    return true;
  }
  return false;
}

int64_t WorkerGroup::incarnation(int local_rank) const {
  for (const auto& w : workers_)
    if (w->local_rank == local_rank) return w->incarnation;
  return 0;
}

bool WorkerGroup::any_succeeded() const {
  for (const auto& w : workers_)
    if (w->exited && !w->exit.signaled && w->exit.exit_code == 0) return true;
  return false;
}

void WorkerGroup::spawn(Worker& w, const GroupEnv& env) {
  // Everything the child needs is prepared here: after fork() in a process with other
  // threads (the store server) only async-signal-safe calls are allowed.
  std::vector<std::string> env_strings = worker_environment(w, env);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> arg_strings{options_.program};
  arg_strings.insert(arg_strings.end(), options_.program_args.begin(), options_.program_args.end());
  std::vector<char*> argv;
  for (auto& s : arg_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  int out_pipe[2], err_pipe[2], status_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0 ||
      ::pipe2(status_pipe, O_CLOEXEC) != 0)
    throw LaunchError(std::string("cannot create pipes: ") + std::strerror(errno));
  const int dev_null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();
  const sigset_t child_mask = signals_.original_mask();
  const int guardian_fd = guardian_ ? guardian_->fd() : -1;
  w.cgroup = cgroups_ != nullptr ? cgroups_->make(w.rank) : std::string();
  const std::string cgroup_procs = w.cgroup.empty() ? std::string() : w.cgroup + "/cgroup.procs";

  // --cpu-bind auto: this local rank's block of CPUs, as a mask the child applies before exec.
  cpu_set_t cpu_mask;
  CPU_ZERO(&cpu_mask);
  bool bind = false;
  if (options_.cpu_bind) {
    for (int c : cpu_block(allowed_cpus(), w.local_rank, options_.nproc_per_node)) {
      CPU_SET(c, &cpu_mask);
      bind = true;
    }
  }
  const pid_t pid = ::fork();
  if (pid < 0) throw LaunchError(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // Child. Its own process group, so stop() reaches the worker's children as well.
    ::setpgid(0, 0);
    // Before anything in the group can start a process: see Note [Guardian].
    if (guardian_fd >= 0) Guardian::register_self(guardian_fd);
    if (!cgroup_procs.empty()) RankCgroups::join(cgroup_procs.c_str());  // Note [Rank cgroups]
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive ember-run
    if (::getppid() != parent) ::_exit(127);
    ::dup2(dev_null >= 0 ? dev_null : STDIN_FILENO, STDIN_FILENO);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    const int status_fd = status_pipe[1];
    // Drop every other descriptor ember-run holds (store sockets, other workers' pipes),
    // except the close-on-exec status pipe, which reports an exec failure.
    if (status_fd > 3) ::close_range(3, static_cast<unsigned>(status_fd - 1), 0);
    ::close_range(static_cast<unsigned>(status_fd + 1), ~0u, 0);
    for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);  // SIGPIPE was ignored
    ::sigprocmask(SIG_SETMASK, &child_mask, nullptr);
    if (bind) ::sched_setaffinity(0, sizeof cpu_mask, &cpu_mask);  // a refusal leaves it unbound
    // execvpe searches ember-run's PATH as a shell would; glibc's builds the candidates on the
    // stack, so it is safe between fork and exec in a process with threads.
    ::execvpe(options_.program.c_str(), argv.data(), envp.data());
    const int err = errno;
    ssize_t ignored = ::write(status_fd, &err, sizeof err);
    (void)ignored;
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, so signals sent right away find the group
  if (dev_null >= 0) ::close(dev_null);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::close(status_pipe[1]);
  w.pid = pid;
  w.running = true;
  w.out_fd = out_pipe[0];
  w.err_fd = err_pipe[0];
  set_nonblocking(w.out_fd);
  set_nonblocking(w.err_fd);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(status_pipe[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  ::close(status_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof child_errno))
    throw LaunchError("cannot execute '" + options_.program + "': " + std::strerror(child_errno));
}

bool WorkerGroup::any_live() const {
  for (const auto& w : workers_)
    if (w->running) return true;
  return false;
}

void WorkerGroup::signal_live(int signo) {
  for (auto& w : workers_)
    if (w->running) ::kill(-w->pid, signo);
}

void WorkerGroup::pump(Worker& w, int& fd, LinePrefixer& sink) {
  char buf[65536];
  while (fd >= 0) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      sink.feed(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    sink.finish();  // EOF (or a broken pipe): flush the last partial line
    close_fd(fd);
  }
}

void WorkerGroup::reap() {
  for (auto& w : workers_) {
    if (!w->running) continue;
    int status = 0;
    pid_t r = ::waitpid(w->pid, &status, WNOHANG);
    if (r != w->pid) continue;
    w->running = false;
    w->exited = true;
    w->exit.rank = w->rank;
    w->exit.local_rank = w->local_rank;
    w->exit.pid = w->pid;
    if (WIFSIGNALED(status)) {
      w->exit.signaled = true;
      w->exit.signal = WTERMSIG(status);
    } else {
      w->exit.exit_code = WEXITSTATUS(status);
    }
    // Whatever it wrote before dying is in the pipe already: print it before we report.
    pump(*w, w->out_fd, *w->out);
    pump(*w, w->err_fd, *w->err);
  }
}

int WorkerGroup::wait_round(int64_t timeout_ms) {
  std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
  for (auto& w : workers_) {
    if (w->out_fd >= 0) fds.push_back({w->out_fd, POLLIN, 0});
    if (w->err_fd >= 0) fds.push_back({w->err_fd, POLLIN, 0});
  }
  ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(timeout_ms, 0)));
  int forwarded = 0;
  for (int s; (s = signals_.next()) != 0;)
    if (SignalWatcher::is_forwarded(s) && !forwarded) forwarded = s;
  for (auto& w : workers_) {
    pump(*w, w->out_fd, *w->out);
    pump(*w, w->err_fd, *w->err);
  }
  reap();
  return forwarded;
}

// Note [Which failure is reported]
// When one rank dies, its peers' collectives fail and they exit 1 soon after, so several workers
// may be found failed. A worker killed by a signal is more likely the cause than one that exited
// with a code, so it is the one reported; among equals, the lowest rank. The order in which the
// kernel lets us reap them is not the order they failed in: a multi-threaded rank killed by
// SIGKILL becomes reapable only once all its threads are gone, and on a busy machine its peer
// can notice the broken connection, print its error and exit first. So when the failure found
// is an exit code while other workers still run, the monitor keeps reaping for up to
// kCauseGraceMs and reports a signal death that shows up in that window instead.
const WorkerGroup::Worker* WorkerGroup::first_failure() const {
  const Worker* failed = nullptr;
  for (auto& w : workers_) {
    if (!w->exited || w->handled || (!w->exit.signaled && w->exit.exit_code == 0)) continue;
    if (failed == nullptr || (w->exit.signaled && !failed->exit.signaled)) failed = w.get();
  }
  return failed;
}

GroupResult WorkerGroup::monitor(const std::function<void()>& on_round) {
  GroupResult result;
  while (true) {
    if (on_round) on_round();
    if (int s = wait_round(options_.monitor_interval_ms)) {
      interrupted_by_ = s;
      signal_live(s);
      result.outcome = GroupResult::kInterrupted;
      result.signal = s;
      return result;
    }
    // See Note [Which failure is reported].
    const Worker* failed = first_failure();
    if (failed != nullptr && !failed->exit.signaled) {
      const auto grace_end = Clock::now() + std::chrono::milliseconds(kCauseGraceMs);
      while (any_live() && Clock::now() < grace_end && !failed->exit.signaled) {
        if (int s = wait_round(10)) {
          interrupted_by_ = s;
          signal_live(s);
          result.outcome = GroupResult::kInterrupted;
          result.signal = s;
          return result;
        }
        failed = first_failure();
      }
    }
    if (failed != nullptr) {
      result.outcome = GroupResult::kWorkerFailed;
      result.failure = failed->exit;
      return result;
    }
    if (!any_live()) {
      drain_pipes(1000);
      result.outcome = GroupResult::kSucceeded;
      return result;
    }
  }
}

void WorkerGroup::stop(int first_signal) {
  if (first_signal) signal_live(first_signal);
  const auto deadline = Clock::now() + std::chrono::milliseconds(options_.stop_timeout_ms);
  bool killed = first_signal == SIGKILL;
  auto killed_at = Clock::now();
  while (any_live()) {
    const auto now = Clock::now();
    if (!killed && now >= deadline) {
      signal_live(SIGKILL);
      killed = true;
      killed_at = now;
    }
    // Only a process stuck in the kernel survives SIGKILL this long; do not wait forever.
    if (killed && now - killed_at > std::chrono::seconds(10)) break;
    const int64_t left = killed ? options_.monitor_interval_ms
                                : std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    if (int s = wait_round(std::min<int64_t>(left, options_.monitor_interval_ms))) {
      interrupted_by_ = s;
      if (!killed) {  // asked again while stopping: no more grace
        signal_live(SIGKILL);
        killed = true;
        killed_at = Clock::now();
      }
    }
  }
  // Grandchildren a worker left behind share its process group, or its cgroup if they left
  // the group: take them down too.
  for (auto& w : workers_) {
    ::kill(-w->pid, SIGKILL);
    RankCgroups::kill_and_remove(w->cgroup);
    w->cgroup.clear();
    if (guardian_ && !w->running) guardian_->forget(w->pid);
  }
  drain_pipes(500);
}

void WorkerGroup::drain_pipes(int64_t timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto open_pipes = [&] {
    for (auto& w : workers_)
      if (w->out_fd >= 0 || w->err_fd >= 0) return true;
    return false;
  };
  while (open_pipes() && Clock::now() < deadline) {
    std::vector<pollfd> fds;
    for (auto& w : workers_) {
      if (w->out_fd >= 0) fds.push_back({w->out_fd, POLLIN, 0});
      if (w->err_fd >= 0) fds.push_back({w->err_fd, POLLIN, 0});
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(left, 1)));
    for (auto& w : workers_) {
      pump(*w, w->out_fd, *w->out);
      pump(*w, w->err_fd, *w->err);
    }
  }
  // A descendant still holds a pipe open: flush what we have and let go.
  for (auto& w : workers_) {
    w->out->finish();
    w->err->finish();
    close_fd(w->out_fd);
    close_fd(w->err_fd);
  }
}

}  // namespace ember::launcher
