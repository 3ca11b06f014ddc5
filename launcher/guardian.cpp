#include "launcher/guardian.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>

#include "core/fd_io.h"
#include "launcher/cgroup.h"

// Note [Guardian]
// ember-run puts each worker in a process group of its own, so stopping a worker's group
// also stops whatever the worker started. Workers carry PR_SET_PDEATHSIG(SIGKILL), so they
// die with ember-run even when it is SIGKILLed, but their children do not: they were
// reparented to PID 1 and ran on. Nothing in a SIGKILLed process can react, so the
// reaction lives in another process: the guardian, forked before any thread exists. It
// holds the read end of a pipe whose only write end is ember-run's (close-on-exec, and
// closed in every worker before exec), so end-of-file on it means exactly "ember-run is
// gone". Messages are int32s: a positive number registers a process group (written by
// the worker itself before exec, so no group exists unregistered), a negative one
// forgets it (written by ember-run once it has swept that group itself). On EOF the
// guardian SIGKILLs every registered group and exits. It sits in its own process group
// with every signal it can block blocked, so neither Ctrl-C nor a signal to ember-run's
// group takes it down first. A process that leaves its group (setsid, setpgid) escapes the
// group kill; where ember-run could make cgroups, the guardian then kills ember-run's cgroup
// too, which holds every worker's (Note [Rank cgroups] in cgroup.cpp).

namespace ember::launcher {
namespace {

[[noreturn]] void guardian_main(int read_fd, const std::string& cgroup) {
  ::setpgid(0, 0);
  sigset_t all;
  ::sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  const int dev_null = ::open("/dev/null", O_RDWR);
  if (dev_null >= 0) {
    for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) ::dup2(dev_null, fd);
  }
  // Hold nothing of ember-run's: the store's socket, pipes of later workers (none exist yet,
  // but a descriptor held here would keep a reader waiting for EOF).
  if (read_fd > 3) ::close_range(3, static_cast<unsigned>(read_fd - 1), 0);
  ::close_range(static_cast<unsigned>(read_fd + 1), ~0u, 0);
  std::set<int32_t> groups;
  for (;;) {
    int32_t msg = 0;
    const io::Transfer t = io::read_full(read_fd, &msg, sizeof msg);
    if (!t.complete(sizeof msg)) break;  // EOF: ember-run is gone
    if (msg > 0)
      groups.insert(msg);
    else if (msg < 0)
      groups.erase(-msg);
  }
  for (int32_t g : groups) ::kill(-g, SIGKILL);
  RankCgroups::kill_and_remove(cgroup);
  ::_exit(0);
}

}  // namespace

Guardian::Guardian(std::string cgroup) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error(std::string("cannot create a pipe: ") + std::strerror(errno));
  pid_ = ::fork();
  if (pid_ < 0) {
    const int err = errno;
    ::close(p[0]);
    ::close(p[1]);
    throw std::runtime_error(std::string("cannot fork the guardian process: ") + std::strerror(err));
  }
  if (pid_ == 0) {
    ::close(p[1]);
    guardian_main(p[0], cgroup);
  }
  ::close(p[0]);
  fd_ = p[1];
}

Guardian::~Guardian() {
  ::close(fd_);
  int status;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

void Guardian::register_self(int fd) {
  const int32_t pgid = static_cast<int32_t>(::getpgrp());
  ssize_t ignored = ::write(fd, &pgid, sizeof pgid);  // one write below PIPE_BUF: atomic
  (void)ignored;
}

void Guardian::forget(pid_t pgid) {
  const int32_t msg = -static_cast<int32_t>(pgid);
  io::write_full(fd_, &msg, sizeof msg);
}

}  // namespace ember::launcher
