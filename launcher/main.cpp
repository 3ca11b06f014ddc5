// ember-run: the torchrun-style launcher. Parses the command line, hosts the TCPStore on
// node 0 (TCPStoreServer; ember-run is not a rank), runs the WorkerGroup, and on failure
// stops it and restarts it with a fresh store up to --max-restarts times. Exit code: 0, the
// failing worker's code (128 + signal if it was killed), 128 + signal when ember-run itself
// was interrupted, 2 for usage errors, 1 when the launcher itself fails, 127 when the
// program cannot be executed.
// Restarts are decided per node: there is no rendezvous between the ember-run agents of
// different nodes (torchrun's elastic agent has one). With --nnodes > 1, node 0 replaces
// its store on every restart; workers on other nodes lose it, fail, and their agent
// restarts them with the same MASTER_PORT, so keep --max-restarts equal on all nodes.
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

std::string random_token() {
  std::random_device rd;  // /dev/urandom
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (int i = 0; i < 8; ++i) {
    uint32_t v = rd();
    for (int j = 0; j < 8; ++j, v >>= 4) token.push_back(kHex[v & 15]);
  }
  return token;  // 256 bits
}

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

int run(const LaunchOptions& o) {
  ::signal(SIGPIPE, SIG_IGN);
  // First of all: it must be forked while nothing else exists, and destroyed last, after
  // the workers are reaped (see Note [Guardian]).
  ember::launcher::Guardian guardian;
  // Before any thread exists (the store server's), so every thread has the signals blocked.
  ember::launcher::SignalWatcher signals;

  std::string token;
  if (const char* env = std::getenv(ember::parallel::kStoreTokenEnv); env && *env) {
    token = env;
  } else if (o.nnodes > 1) {
    say("error: with --nnodes > 1, export the same EMBER_STORE_TOKEN on every node");
    return 2;
  } else {
    token = random_token();
  }
  if (!o.log_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.log_dir, ec);
    if (ec) {
      say("error: cannot create --log-dir '" + o.log_dir + "': " + ec.message());
      return 1;
    }
  }

  ember::launcher::WorkerGroup group(o, signals, &guardian);
  std::unique_ptr<TCPStoreServer> store;
  int port = o.master_port;
  for (int attempt = 0;; ++attempt) {
    if (o.node_rank == 0) {
      store.reset();
      store = start_store(o, port, token, /*may_pick_another_port=*/o.nnodes == 1 && attempt > 0 &&
                                              o.master_port == 0);
      port = store->port();
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
