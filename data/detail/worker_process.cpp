#include "data/detail/worker_process.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <mutex>
#include <new>
#include <set>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "core/error.h"

namespace ember::data::detail {
namespace {

// Parent-side sockets of every live worker of this process.
struct FdRegistry {
  std::mutex mu;
  std::set<int> fds;  // guarded by mu
};
FdRegistry& registry() {
  static FdRegistry* r = new FdRegistry();  // leaked on purpose: usable during static destruction
  return *r;
}

void sleep_ms(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

}  // namespace

std::unique_ptr<WorkerProcess> WorkerProcess::spawn(const std::function<void(int fd)>& body) {
  auto& reg = registry();
  std::vector<int> inherited;
  int sv[2];
  pid_t pid;
  // Held across fork() so no sibling socket is half-registered in the child's snapshot.
  reg.mu.lock();
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    int err = errno;
    reg.mu.unlock();
    EMBER_THROW(Error, "DataLoader: socketpair failed: ", std::strerror(err));
  }
  inherited.assign(reg.fds.begin(), reg.fds.end());
  pid = ::fork();
  if (pid == 0) {
    // Child: the registry mutex is locked by the thread that forked, which does not exist
    // here. Give the child a fresh, empty registry (a worker may build a loader of its own).
    new (&reg.mu) std::mutex();
    new (&reg.fds) std::set<int>();
  } else {
    reg.mu.unlock();
  }
  if (pid < 0) {
    int err = errno;
    ::close(sv[0]);
    ::close(sv[1]);
    EMBER_THROW(Error, "DataLoader: fork() of a worker failed: ", std::strerror(err));
  }
  if (pid == 0) {
    for (int fd : inherited) ::close(fd);
    ::close(sv[0]);
    int code = 0;
    try {
      body(sv[1]);
    } catch (...) {
      code = 1;
    }
    ::_exit(code);
  }
  ::close(sv[1]);
  {
    std::lock_guard<std::mutex> lock(reg.mu);
    reg.fds.insert(sv[0]);
  }
  return std::unique_ptr<WorkerProcess>(new WorkerProcess(pid, sv[0]));
}

WorkerProcess::~WorkerProcess() { terminate(1000); }

void WorkerProcess::close_socket() {
  if (fd_ < 0) return;
  {
    auto& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mu);
    reg.fds.erase(fd_);
  }
  ::shutdown(fd_, SHUT_RDWR);
  ::close(fd_);
  fd_ = -1;
}

bool WorkerProcess::check_exited() {
  if (status_) return true;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = st;
    return true;
  }
  if (r < 0 && errno == ECHILD) {  // reaped elsewhere (SIGCHLD ignored)
    status_ = -1;
    return true;
  }
  return false;
}

bool WorkerProcess::wait_exit(int timeout_ms) {
  for (int waited = 0;; ++waited) {
    if (check_exited()) return true;
    if (waited >= timeout_ms) return false;
    sleep_ms(1);
  }
}

void WorkerProcess::kill_now() {
  if (!status_) ::kill(pid_, SIGKILL);
}

void WorkerProcess::terminate(int grace_ms) {
  close_socket();
  if (status_) return;
  if (wait_exit(grace_ms)) return;
  ::kill(pid_, SIGKILL);
  int st = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &st, 0);
  } while (r < 0 && errno == EINTR);
  status_ = r == pid_ ? st : -1;
}

std::string WorkerProcess::describe_status(int status) {
  if (status == -1) return "exited (status unavailable: SIGCHLD is ignored)";
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* abbrev = ::sigabbrev_np(sig);
    std::string s = "was killed by signal " + std::to_string(sig) + " (SIG" + (abbrev ? abbrev : "?") + ")";
    if (sig == SIGBUS) s += "; this can be caused by too little shared memory in /dev/shm";
    return s;
  }
  if (WIFEXITED(status)) return "exited unexpectedly with code " + std::to_string(WEXITSTATUS(status));
  return "stopped with wait status " + std::to_string(status);
}

}  // namespace ember::data::detail
