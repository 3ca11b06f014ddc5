// ember-run: the torchrun-style launcher. Parses the command line, hosts the TCPStore on
// node 0 (TCPStoreServer; ember-run is not a rank), runs the WorkerGroup, and on failure
// stops it and restarts it with a fresh store up to --max-restarts times. Exit code: 0, the
// failing worker's code (128 + signal if it was killed), 128 + signal when ember-run itself
// was interrupted, 2 for usage errors, 1 when the launcher itself fails, 127 when the
// program cannot be executed.
//
// Note [Restart rounds]
// Restarts are decided per node: there is no rendezvous between the ember-run agents of
// different nodes (torchrun's elastic agent has one). Node 0 starts a fresh store for every
// attempt and writes its round there ("ember-run/round", and "ember-run/round/<r>"); ranks
// take their round from it (init_process_group, see init.h), so a restarted group's
// rendezvous never reads the last round's keys, and a node started late (a replacement for
// one whose ember-run died) joins the current round. A failure anywhere reaches every node:
// the failed ranks' peers get a DistributedError in their next collective. After a failure
// a node other than 0 waits (reconnecting while node 0 replaces its store) until node 0 has
// started the next round before it restarts its workers, so it never restarts into the old
// store. Keep --max-restarts equal on all nodes.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>
#include <thread>

#include "core/error.h"

#include "launcher/cgroup.h"
#include "launcher/guardian.h"
#include "launcher/launch_options.h"
#include "launcher/signal_watcher.h"
#include "launcher/worker_group.h"
#include "parallel/distributed/tcp_store.h"
#include "parallel/distributed/tcp_store_server.h"

namespace {

using ember::launcher::GroupEnv;
using ember::launcher::GroupResult;
using ember::launcher::LaunchOptions;
using ember::parallel::TCPStoreServer;
using ember::parallel::TCPStoreServerOptions;

void say(const std::string& line) { std::cerr << "ember-run: " << line << std::endl; }

// A fresh server per attempt: a restarted group must not see the last attempt's keys.
std::unique_ptr<TCPStoreServer> start_store(const LaunchOptions& o, int port, const std::string& token,
                                            bool may_pick_another_port) {
  TCPStoreServerOptions so;
  so.bind_address = o.nnodes == 1 ? "127.0.0.1" : "0.0.0.0";
  so.port = static_cast<uint16_t>(port);
  so.token = token;
  try {
    return std::make_unique<TCPStoreServer>(so);
  } catch (const std::exception&) {
    if (!may_pick_another_port) throw;
    so.port = 0;  // our old port was taken meanwhile; single node, so any port will do
    return std::make_unique<TCPStoreServer>(so);
  }
}

constexpr const char* kRoundKey = "ember-run/round";

// Node 0: writes the attempt's round into its new store.
void publish_round(const LaunchOptions& o, int port, const std::string& token, int round) {
  ember::parallel::TCPStoreOptions co;
  co.token = token;
  co.timeout_ms = 10'000;
  ember::parallel::TCPStore client(o.nnodes == 1 ? "127.0.0.1" : o.master_addr, static_cast<uint16_t>(port), co);
  client.set(kRoundKey, std::to_string(round));
  client.set(std::string(kRoundKey) + "/" + std::to_string(round), std::string("1"));
}

// Other nodes, after a failure: waits until node 0's store says round `round` has begun,
// reconnecting while node 0 replaces the store. Throws DistributedError after timeout_ms.
void wait_for_round(const LaunchOptions& o, const std::string& token, int round, int64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  const std::string key = std::string(kRoundKey) + "/" + std::to_string(round);
  std::string last_error;
  while (std::chrono::steady_clock::now() < deadline) {
    const int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    try {
      ember::parallel::TCPStoreOptions co;
      co.token = token;
      co.timeout_ms = std::max<int64_t>(left, 1);
      ember::parallel::TCPStore client(o.master_addr, static_cast<uint16_t>(o.master_port), co);
      client.wait({key}, std::max<int64_t>(left, 1));
      return;
    } catch (const ember::DistributedError& e) {  // the old store went away: try the new one
      last_error = e.what();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } catch (const ember::TimeoutError& e) {
      last_error = e.what();
      break;
    }
  }
  throw ember::DistributedError("node 0 did not start round " + std::to_string(round) + " within " +
                                std::to_string(timeout_ms) + " ms (" + last_error + ")");
}

int run(const LaunchOptions& o) {
  ::signal(SIGPIPE, SIG_IGN);
  // The guardian kills this cgroup when ember-run is gone, so it exists first (no thread).
  ember::launcher::RankCgroups cgroups;
  if (!cgroups.available())
    say("note: ranks run without cgroups (" + cgroups.why_not() +
        "); a process a rank starts that leaves its process group (setsid) can outlive ember-run");
  // It must be forked while nothing else exists, and destroyed before the cgroups, after
  // the workers are reaped (see Note [Guardian]).
  ember::launcher::Guardian guardian(cgroups.root());
  // Before any thread exists (the store server's), so every thread has the signals blocked.
  ember::launcher::SignalWatcher signals;

  std::string token;
  if (const char* env = std::getenv(ember::parallel::kStoreTokenEnv); env && *env) {
    token = env;
  } else if (o.nnodes > 1) {
    say("error: with --nnodes > 1, export the same EMBER_STORE_TOKEN on every node");
    return 2;
  } else {
    token = ember::parallel::make_store_token();
  }
  if (!o.log_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.log_dir, ec);
    if (ec) {
      say("error: cannot create --log-dir '" + o.log_dir + "': " + ec.message());
      return 1;
    }
  }

  ember::launcher::WorkerGroup group(o, signals, &guardian, &cgroups);
  std::unique_ptr<TCPStoreServer> store;
  int port = o.master_port;
  for (int attempt = 0;; ++attempt) {
    if (o.node_rank == 0) {
      store.reset();
      store = start_store(o, port, token, /*may_pick_another_port=*/o.nnodes == 1 && attempt > 0 &&
                                              o.master_port == 0);
      port = store->port();
      publish_round(o, port, token, attempt);
    } else if (attempt > 0) {
      wait_for_round(o, token, attempt, 120'000);
    }
    group.start(GroupEnv{o.master_addr, port, token, attempt});
    const GroupResult r = group.monitor();
    if (r.outcome == GroupResult::kSucceeded) return 0;
    if (r.outcome == GroupResult::kInterrupted) {
      say(std::string("received ") + ::sigabbrev_np(r.signal) + "; forwarded it to the workers");
      group.stop(0);
      return 128 + r.signal;
    }
    say(r.failure.describe());
    say("stopping the other workers");
    group.stop(SIGTERM);
    if (group.interrupted_by()) return 128 + group.interrupted_by();
    if (attempt < o.max_restarts) {
      say("restarting the worker group (restart " + std::to_string(attempt + 1) + " of " +
          std::to_string(o.max_restarts) + ")");
      continue;
    }
    if (o.max_restarts > 0) say("giving up after " + std::to_string(o.max_restarts) + " restarts");
    return r.failure.launcher_exit_code();
  }
}

}  // namespace

int main(int argc, char** argv) {
  LaunchOptions options;
  try {
    options = ember::launcher::parse_launch_options(argc, argv);
  } catch (const ember::launcher::UsageError& e) {
    std::cerr << "ember-run: error: " << e.what() << "\n\n" << ember::launcher::usage_text();
    return 2;
  }
  if (options.help) {
    std::cout << ember::launcher::usage_text();
    return 0;
  }
  try {
    return run(options);
  } catch (const ember::launcher::LaunchError& e) {
    say(std::string("error: ") + e.what());
    return 127;
  } catch (const std::exception& e) {
    say(std::string("error: ") + e.what());
    return 1;
  }
}
