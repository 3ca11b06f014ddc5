// WorkerProcess: one forked DataLoader worker and the parent's end of the socket to it.
// The parent owns the handle; destroying it closes the socket, waits briefly, SIGKILLs if
// needed and always reaps the child (no zombies). A process-wide registry of the parent-side
// sockets lets each new child close the sockets of its siblings and of other loaders, so a
// worker's death is seen as end-of-stream at once. Thread-safe: spawn() may be called from
// several threads; one WorkerProcess is used by one thread at a time.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>

namespace ember::data::detail {

class WorkerProcess {
 public:
  /// Forks a child that runs body(socket_fd) and then _exit(0)s (never returns, never runs
  /// the parent's destructors or atexit handlers; an escaping exception exits with code 1).
  /// Throws ember::Error when socketpair() or fork() fails.
  static std::unique_ptr<WorkerProcess> spawn(const std::function<void(int fd)>& body);

  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;
  ~WorkerProcess();

  pid_t pid() const { return pid_; }
  /// The parent's end of the socket; -1 after close_socket().
  int fd() const { return fd_; }
  /// Reaps without blocking; true when the child has exited (then status() is set).
  bool check_exited();
  /// Waits up to timeout_ms for the child to exit on its own; true when it has.
  bool wait_exit(int timeout_ms);
  /// The wait status once reaped (-1 if it was reaped by someone else, e.g. SIGCHLD ignored).
  std::optional<int> status() const { return status_; }
  void close_socket();
  /// Closes the socket, waits up to grace_ms, then SIGKILLs, and reaps. Idempotent.
  void terminate(int grace_ms);
  /// Sends SIGKILL (tests and error paths).
  void kill_now();

  /// "was killed by signal 9 (SIGKILL)", "exited unexpectedly with code 3", ...
  static std::string describe_status(int status);

 private:
  WorkerProcess(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  pid_t pid_;
  int fd_;
  std::optional<int> status_;
};

}  // namespace ember::data::detail
