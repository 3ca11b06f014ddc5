// Forked ranks for the multi-process tests: run_ranks forks one child per rank with the
// torchrun-style environment (RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT), runs
// body(rank) in it, and collects each child's exit status and the message it returned.
// A child never returns into GoogleTest: it _exit()s. Loopback only.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/free_port.h"

namespace ember::parallel::test {

struct RankResult {
  pid_t pid = -1;
  int status = -1;        // as waitpid gives it
  std::string message;    // what body returned
  bool exited_ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
  std::string describe() const {
    std::string s = "pid " + std::to_string(pid);
    if (WIFEXITED(status)) s += " exit " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) s += " signal " + std::to_string(WTERMSIG(status));
    return s + ": " + message;
  }
};

/// Where the ranks' store is: port 0 means rank 0 hosts an ember TCPStore on a free port;
/// otherwise a launcher-like host already serves one at 127.0.0.1:port, and `env` says what
/// kind (e.g. TORCHELASTIC_USE_AGENT_STORE=True for a PyTorch store, as torchrun sets).
struct StoreSetup {
  uint16_t port = 0;
  std::vector<std::pair<std::string, std::string>> env;
};

/// body returns {exit code, message}. The parent kills every child still alive after
/// timeout_s, and the ranks in `kill_when_others_done` (e.g. one that stopped itself) as
/// soon as all the others exited.
inline std::vector<RankResult> run_ranks(int n, const std::function<std::pair<int, std::string>(int rank)>& body,
                                         int timeout_s = 60, const std::vector<int>& kill_when_others_done = {},
                                         const StoreSetup& store = {}) {
  const uint16_t port = store.port != 0 ? store.port : support::free_port();
  std::vector<RankResult> results(static_cast<size_t>(n));
  std::vector<int> fds(static_cast<size_t>(n), -1);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (::pipe(p) != 0) std::abort();
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::unsetenv("EMBER_USE_AGENT_STORE");
      ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
      for (const auto& [k, v] : store.env) ::setenv(k.c_str(), v.c_str(), 1);
      int code = 1;
      std::string msg;
      try {
        std::tie(code, msg) = body(r);
      } catch (const std::exception& e) {
        code = 100;
        msg = std::string("uncaught: ") + e.what();
      }
      size_t off = 0;
      while (off < msg.size()) {
        const ssize_t w = ::write(p[1], msg.data() + off, msg.size() - off);
        if (w <= 0) break;
        off += static_cast<size_t>(w);
      }
      ::_exit(code);
    }
    ::close(p[1]);
    fds[r] = p[0];
    results[r].pid = pid;
    pids.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  // Drain the pipes until every child closed its end (it exited), then reap.
  auto is_lingerer = [&](int r) {
    for (int k : kill_when_others_done)
      if (k == r) return true;
    return false;
  };
  int open = n;
  for (;;) {
    int others_open = 0;
    for (int r = 0; r < n; ++r) others_open += (fds[r] >= 0 && !is_lingerer(r));
    if (open == 0 || others_open == 0) break;
    std::vector<pollfd> pfds;
    std::vector<int> which;
    for (int r = 0; r < n; ++r)
      if (fds[r] >= 0) {
        pfds.push_back({fds[r], POLLIN, 0});
        which.push_back(r);
      }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    if (::poll(pfds.data(), pfds.size(), static_cast<int>(left.count())) <= 0) continue;
    for (size_t k = 0; k < pfds.size(); ++k) {
      if (!(pfds[k].revents & (POLLIN | POLLHUP))) continue;
      char buf[4096];
      const ssize_t got = ::read(fds[which[k]], buf, sizeof buf);
      if (got > 0) {
        results[which[k]].message.append(buf, static_cast<size_t>(got));
      } else {
        ::close(fds[which[k]]);
        fds[which[k]] = -1;
        --open;
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    if (fds[r] >= 0) {
      ::kill(results[r].pid, SIGKILL);
      ::close(fds[r]);
      if (!is_lingerer(r)) results[r].message += " [killed by the test after " + std::to_string(timeout_s) + " s]";
    }
    ::waitpid(results[r].pid, &results[r].status, 0);
  }
  return results;
}

}  // namespace ember::parallel::test
