// ember-bench-store: the store rendezvous a process group does at init, for N clients on
// loopback, against PyTorch's TCPStore (libuv server) with the same pattern in the same run.
//
// Note [Store rendezvous pattern]
// N clients, each its own connection, spread over kProcs client processes (a process emulates
// its clients phase by phase, so no phase waits on a later one of its own process):
//   1. connect, set "rank/<i>" to a 32-byte address;
//   2. wait for every rank's key (one wait request naming all N keys), then get the values of its
//      two ring neighbours (i-1, i+1: what a ring's bootstrap reads);
//   3. barrier: add("barrier", 1); the client that brings it to N sets "barrier/done"; every
//      client waits for "barrier/done".
// ember's own ProcessGroupTCP reads every peer's address (N gets per rank, N^2 in all: 16.7M round
// trips at N = 4096), which a Python client cannot do at that N within a benchmark's time; the
// wait of step 2 keeps the N^2 key checks on the server, the round trips stay O(N).
// The clock runs on the parent from telling the client processes to go (their server already
// listening) to the last process reporting its last client past the barrier.
//   store_rendezvous_ms_<N>                 ember's TCPStore server and clients, N = 256, 1024, 4096
//   store_rendezvous_growth_4096_vs_1024    ms_4096 / ms_1024 (4: linear in N; 16: quadratic)
//   torch_store_rendezvous_ms_<N>           PyTorch's TCPStore (libuv) and its Python clients
//                                           (bench_store_torch.py under bench::peer_python()),
//                                           N = 1024, 4096, with peer_torch_version
//   store_rendezvous_vs_torch_ratio_<N>     ember / PyTorch (below 1: ember is faster; goal <= 0.5
//                                           at 4096)
// PyTorch's client resolves each connection's peer address by name (a reverse DNS query per
// connection); on a host whose DNS server drops some queries, each dropped one stalls that client
// for the resolver's timeout, so the peer runs with RES_OPTIONS="timeout:1 attempts:1".
// Each figure is the median of EMBER_BENCH_STORE_REPS (default 3) rendezvous, ember's and
// PyTorch's alternating.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "parallel/distributed/tcp_store.h"

#ifndef EMBER_BENCH_STORE_TORCH_SCRIPT
#define EMBER_BENCH_STORE_TORCH_SCRIPT "bench/bench_store_torch.py"
#endif

namespace {

using namespace ember;
using namespace ember::parallel;

constexpr int kProcs = 4;
constexpr int64_t kTimeoutMs = 300'000;

bool read_all(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// One client process: clients [first, last) of n, phase by phase (Note [Store rendezvous pattern]).
int run_clients(int go_fd, int done_fd, int first, int last, int n) {
  uint16_t port = 0;
  if (!read_all(go_fd, &port, sizeof port) || port == 0) return 1;
  try {
    TCPStoreOptions o;
    o.timeout_ms = kTimeoutMs;
    std::vector<std::unique_ptr<TCPStore>> clients;
    const std::string address(32, 'a');
    for (int i = first; i < last; ++i) {
      clients.push_back(std::make_unique<TCPStore>("127.0.0.1", port, o));
      clients.back()->set("rank/" + std::to_string(i), address);
    }
    std::vector<std::string> all;
    for (int i = 0; i < n; ++i) all.push_back("rank/" + std::to_string(i));
    for (int i = first; i < last; ++i) {
      TCPStore& s = *clients[static_cast<size_t>(i - first)];
      s.wait(all);
      for (int peer : {(i + n - 1) % n, (i + 1) % n})
        if (s.get("rank/" + std::to_string(peer)).size() != address.size()) return 1;
    }
    for (int i = first; i < last; ++i)
      if (clients[static_cast<size_t>(i - first)]->add("barrier", 1) == n)
        clients[static_cast<size_t>(i - first)]->set("barrier/done", "1");
    for (auto& c : clients) c->wait({"barrier/done"});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "store client: %s\n", e.what());
    return 1;
  }
  const char ok = 1;
  return ::write(done_fd, &ok, 1) == 1 ? 0 : 1;
}

// ember's rendezvous of n clients; milliseconds, or -1 on failure.
double ember_rendezvous_ms(int n) {
  std::vector<int> go(kProcs), done(kProcs);
  std::vector<pid_t> pids;
  std::fflush(stdout);
  for (int p = 0; p < kProcs; ++p) {
    int g[2], d[2];
    if (::pipe(g) != 0 || ::pipe(d) != 0) return -1;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(g[1]);
      ::close(d[0]);
      ::_exit(run_clients(g[0], d[1], n * p / kProcs, n * (p + 1) / kProcs, n));
    }
    ::close(g[0]);
    ::close(d[1]);
    go[static_cast<size_t>(p)] = g[1];
    done[static_cast<size_t>(p)] = d[0];
    pids.push_back(pid);
  }
  double ms = -1;
  {
    // The server starts after the forks: the client processes inherit none of its threads.
    TCPStoreOptions so;
    so.is_server = true;
    so.timeout_ms = kTimeoutMs;
    TCPStore server("127.0.0.1", 0, so);
    const uint16_t port = server.port();
    const auto t0 = bench::Clock::now();
    for (int fd : go)
      if (::write(fd, &port, sizeof port) != sizeof port) return -1;
    bool all_ok = true;
    for (int fd : done) {
      char c = 0;
      all_ok = read_all(fd, &c, 1) && all_ok;
    }
    if (all_ok) ms = bench::ms_between(t0, bench::Clock::now());
    for (pid_t pid : pids) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ms = -1;
    }
  }
  for (int fd : go) ::close(fd);
  for (int fd : done) ::close(fd);
  return ms;
}

// PyTorch's rendezvous of n clients (bench_store_torch.py); milliseconds, or -1 with `why` set.
double torch_rendezvous_ms(const std::string& python, int n, std::string& version, std::string& why) {
  const int timeout_s = bench::peer_timeout_s();
  const auto run = bench::run_bounded({python, EMBER_BENCH_STORE_TORCH_SCRIPT, std::to_string(n),
                                       std::to_string(kProcs), std::to_string(timeout_s)},
                                      timeout_s, {"RES_OPTIONS=timeout:1 attempts:1"});
  double ms = -1;
  for (const std::string& line : bench::output_lines(run.output)) {
    double v = 0;
    if (std::sscanf(line.c_str(), "torch_store_rendezvous_ms %lf", &v) == 1) ms = v;
    bench::parse_torch_line(line, version);
  }
  if (run.timed_out) {
    why = "PyTorch's rendezvous of " + std::to_string(n) + " clients timed out after " + std::to_string(timeout_s) +
          " s (EMBER_BENCH_PEER_TIMEOUT_S); killed";
    return -1;
  }
  if (!run.ok() || ms <= 0) {
    why = python + " " + EMBER_BENCH_STORE_TORCH_SCRIPT + " did not report (" + bench::one_line(run.output, 300) + ")";
    return -1;
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  ember::bench::start_without_flags("ember-bench-store",
                                    "The store rendezvous of N clients on loopback against PyTorch's TCPStore. Takes "
                                    "no flags (EMBER_BENCH_STORE_REPS, EMBER_BENCH_PEER_TIMEOUT_S).",
                                    argc, argv);
  // Every client is a connection: the server holds N sockets and each client process N / kProcs.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  const int reps = bench::env_int("EMBER_BENCH_STORE_REPS", 3);
  const std::string python = bench::peer_python();
  std::string why;
  std::string version = bench::torch_version(python, why);
  bench::print_peer_version(version, "torch TCPStore peer", why);
  bool with_peer = !version.empty();

  std::vector<std::pair<int, double>> ember_ms;
  for (int n : {256, 1024, 4096}) {
    const bool peer_here = with_peer && n >= 1024;
    std::vector<double> e, t;
    for (int r = 0; r < reps; ++r) {
      const double ms = ember_rendezvous_ms(n);
      if (ms > 0) e.push_back(ms);
      if (peer_here && with_peer) {
        std::string v;
        const double tm = torch_rendezvous_ms(python, n, v, why);
        if (tm > 0) {
          t.push_back(tm);
        } else {
          std::printf("# torch TCPStore peer stopped: %s\n", bench::one_line(why).c_str());
          with_peer = false;
        }
      }
    }
    if (e.size() != static_cast<size_t>(reps)) {
      std::printf("# store_rendezvous_ms_%d: %zu of %d rendezvous failed (see stderr)\n", n,
                  static_cast<size_t>(reps) - e.size(), reps);
    }
    const double em = bench::median(e);
    if (em > 0) {
      std::printf("store_rendezvous_ms_%d %.2f ms\n", n, em);
      ember_ms.emplace_back(n, em);
    }
    if (peer_here && t.size() == static_cast<size_t>(reps)) {
      const double tm = bench::median(t);
      std::printf("torch_store_rendezvous_ms_%d %.2f ms\n", n, tm);
      if (em > 0) std::printf("store_rendezvous_vs_torch_ratio_%d %.3f ratio\n", n, em / tm);
    }
    std::fflush(stdout);
  }
  double m1024 = 0, m4096 = 0;
  for (const auto& [n, ms] : ember_ms) {
    if (n == 1024) m1024 = ms;
    if (n == 4096) m4096 = ms;
  }
  if (m1024 > 0 && m4096 > 0) std::printf("store_rendezvous_growth_4096_vs_1024 %.2f ratio\n", m4096 / m1024);
  return 0;
}
