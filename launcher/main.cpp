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
#include <map>
#include <memory>
#include <optional>
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
#include "parallel/ft/keys.h"

namespace {

namespace launcher = ember::launcher;
namespace parallel = ember::parallel;

void say(const std::string& line) { std::cerr << "ember-run: " << line << std::endl; }

// A fresh server per attempt: a restarted group must not see the last attempt's keys.
std::unique_ptr<parallel::TCPStoreServer> start_store(const launcher::LaunchOptions& o, int port,
                                                      const std::string& token, bool may_pick_another_port) {
  parallel::TCPStoreServerOptions so;
  so.bind_address = o.nnodes == 1 ? "127.0.0.1" : "0.0.0.0";
  so.port = static_cast<uint16_t>(port);
  so.token = token;
  try {
    return std::make_unique<parallel::TCPStoreServer>(so);
  } catch (const std::exception&) {
    if (!may_pick_another_port) throw;
    so.port = 0;  // our old port was taken meanwhile; single node, so any port will do
    return std::make_unique<parallel::TCPStoreServer>(so);
  }
}

constexpr const char* kRoundKey = "ember-run/round";

// Node 0: writes the attempt's round into its new store.
void publish_round(const launcher::LaunchOptions& o, int port, const std::string& token, int round) {
  ember::parallel::TCPStoreOptions co;
  co.token = token;
  co.timeout_ms = 10'000;
  ember::parallel::TCPStore client(o.nnodes == 1 ? "127.0.0.1" : o.master_addr, static_cast<uint16_t>(port), co);
  client.set(kRoundKey, std::to_string(round));
  client.set(std::string(kRoundKey) + "/" + std::to_string(round), std::string("1"));
}

// Other nodes, after a failure: waits until node 0's store says round `round` has begun,
// reconnecting while node 0 replaces the store. Throws DistributedError after timeout_ms.
void wait_for_round(const launcher::LaunchOptions& o, const std::string& token, int round, int64_t timeout_ms) {
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

// Note [ember-run --ft]
// With --ft a failed worker does not stop the others: ember-run marks its incarnation dead in
// the store (its heartbeat key, parallel/ft/keys.h), which the ranks' quorum reads at once
// instead of waiting out the ft timeout, and starts a replacement with the next incarnation
// (up to --max-restarts per rank) that joins at a step boundary. A rank the others found
// silent past the ft timeout (SIGSTOP, a stuck process) is named in kill/<rank>; ember-run
// SIGKILLs that incarnation and replaces it like a dead one. The store lives on node 0 for the
// whole job (never replaced), so a store that goes away means node 0's ember-run went away, and
// the ranks fail (PR_SET_PDEATHSIG on node 0, their lost store connection everywhere) rather
// than hang; another node's ember-run, which reads the store every monitor round, says so and
// fails at once.
// Several nodes: each node's ember-run runs its own ranks. One that dies takes its ranks with
// it (PR_SET_PDEATHSIG, the guardian, the rank cgroups), and nobody writes their death marks:
// the other ranks drop them when their heartbeats stop for --ft-timeout (or sooner, when a
// replacement's heartbeat shows a new incarnation). A new ember-run started with the same
// arguments brings replacements: every start takes its incarnation from a counter in the store
// (incarnation/<rank>), so no incarnation is used twice whichever ember-run starts it. Node 0
// keeps the store up, once its own ranks are done, until every other node said it is done
// (node-done/<node>) or its ranks went silent.

// Thrown out of the monitor's round when the store cannot be reached.
struct StoreLost {
  std::string what;
};

// Node 0, its ranks done: waits until every other node is done or its ranks' heartbeats have
// not moved for the ft timeout (the node is gone), so that no rank loses the store mid-finish.
void wait_for_other_nodes(const launcher::LaunchOptions& o, ember::parallel::Store& client) {
  namespace ft = ember::parallel::ft;
  using Clock = std::chrono::steady_clock;
  std::map<int, std::pair<std::string, Clock::time_point>> seen;  // slot -> heartbeat, since when
  for (;;) {
    bool waiting = false;
    const auto now = Clock::now();
    for (int n = 1; n < o.nnodes; ++n) {
      if (ft::peek(client, ft::node_done_key(n))) continue;
      for (int lr = 0; lr < o.nproc_per_node; ++lr) {
        const int slot = n * o.nproc_per_node + lr;
        const std::string hb = ft::peek(client, ft::heartbeat_key(slot)).value_or("");
        auto it = seen.find(slot);
        if (it == seen.end() || it->second.first != hb) it = seen.insert_or_assign(slot, std::pair{hb, now}).first;
        const auto parsed = ft::parse_heartbeat(hb);
        if ((!parsed || !parsed->dead) && now - it->second.second < std::chrono::milliseconds(o.ft_timeout_ms))
          waiting = true;
      }
    }
    if (!waiting) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int run_ft(const launcher::LaunchOptions& o, launcher::WorkerGroup& group, const std::string& token) {
  namespace ft = ember::parallel::ft;
  std::unique_ptr<parallel::TCPStoreServer> store;
  int port = o.master_port;
  if (o.node_rank == 0) {
    store = start_store(o, port, token, false);
    port = store->port();
    publish_round(o, port, token, 0);
  }
  ember::parallel::TCPStoreOptions co;
  co.token = token;
  co.timeout_ms = 10'000;
  co.wait_for_workers = false;
  const std::string host = o.node_rank == 0 && o.nnodes == 1 ? "127.0.0.1" : o.master_addr;
  ember::parallel::TCPStore client(host, static_cast<uint16_t>(port), co);
  const std::string where = host + ":" + std::to_string(port);
  auto store_lost = [&](const std::string& what) {
    say("error: lost the job's store at " + where + " (" + what + ")" +
        (o.node_rank == 0 ? "" : ": node 0's ember-run, which hosts it, is gone") + "; stopping this node's ranks");
    group.stop(SIGTERM);
    return 1;
  };
  group.set_incarnation_source([&](int rank) {
    try {
      return client.add(ft::incarnation_key(rank), 1) - 1;
    } catch (const std::exception& e) {
      throw StoreLost{std::string("numbering rank ") + std::to_string(rank) + "'s start: " + e.what()};
    }
  });
  const launcher::GroupEnv env{o.master_addr, port, token, 0};
  try {
    group.start(env);
  } catch (const StoreLost& e) {
    return store_lost(e.what);
  }
  std::vector<int> restarts(static_cast<size_t>(o.nproc_per_node), 0);
  auto rank_of = [&](int local_rank) { return o.node_rank * o.nproc_per_node + local_rank; };
  // Kill requests from the ranks (Note [ember-run --ft]); also proof that the store is there.
  auto on_round = [&] {
    for (int lr = 0; lr < o.nproc_per_node; ++lr) {
      const int rank = rank_of(lr);
      std::optional<std::string> v;
      try {
        v = ft::peek(client, ft::kill_key(rank));
      } catch (const std::exception& e) {
        throw StoreLost{e.what()};
      }
      if (!v || *v != std::to_string(group.incarnation(lr))) continue;
      if (group.kill_worker(lr, group.incarnation(lr)))
        say("rank " + std::to_string(rank) + " (incarnation " + *v + ") went silent past --ft-timeout (" +
            std::to_string(o.ft_timeout_ms) + " ms); killed it");
    }
  };
  int last_failure_code = 1;
  for (;;) {
    launcher::GroupResult r;
    try {
      r = group.monitor(on_round);
    } catch (const StoreLost& e) {
      return store_lost(e.what);
    }
    if (r.outcome == launcher::GroupResult::kSucceeded) {
      if (!group.any_succeeded()) {
        say("every rank failed and none is left to replace");
        return last_failure_code;
      }
      try {
        if (o.node_rank == 0) {
          wait_for_other_nodes(o, client);
        } else {
          client.set(ft::node_done_key(o.node_rank), std::string("1"));
        }
      } catch (const std::exception& e) {
        if (o.node_rank == 0) say(std::string("note: cannot wait for the other nodes: ") + e.what());
      }
      return 0;
    }
    if (r.outcome == launcher::GroupResult::kInterrupted) {
      say(std::string("received ") + ::sigabbrev_np(r.signal) + "; forwarded it to the workers");
      group.stop(0);
      return 128 + r.signal;
    }
    const int lr = r.failure.local_rank;
    const int64_t inc = group.incarnation(lr);
    last_failure_code = r.failure.launcher_exit_code();
    try {
      client.set(ft::heartbeat_key(r.failure.rank), ft::dead_heartbeat(inc));
    } catch (const std::exception& e) {
      say(r.failure.describe() + " (incarnation " + std::to_string(inc) + ")");
      return store_lost(std::string("marking rank ") + std::to_string(r.failure.rank) + " dead: " + e.what());
    }
    say(r.failure.describe() + " (incarnation " + std::to_string(inc) + "); the other ranks go on without it");
    if (restarts[size_t(lr)] < o.max_restarts) {
      ++restarts[size_t(lr)];
      say("starting a replacement for rank " + std::to_string(r.failure.rank) + " (restart " +
          std::to_string(restarts[size_t(lr)]) + " of " + std::to_string(o.max_restarts) +
          "); it joins at the next step boundary");
      try {
        group.respawn(lr, env);
      } catch (const StoreLost& e) {
        return store_lost(e.what);
      }
    } else {
      say("rank " + std::to_string(r.failure.rank) + " is not replaced (--max-restarts " +
          std::to_string(o.max_restarts) + " used up)");
      group.abandon(lr);
    }
  }
}

int run(const launcher::LaunchOptions& o) {
  ::signal(SIGPIPE, SIG_IGN);
  // The guardian kills this cgroup when ember-run is gone, so it exists first (no thread).
  launcher::RankCgroups cgroups;
  if (!cgroups.available())
    say("note: ranks run without cgroups (" + cgroups.why_not() +
        "); a process a rank starts that leaves its process group (setsid) can outlive ember-run");
  // It must be forked while nothing else exists, and destroyed before the cgroups, after
  // the workers are reaped (see Note [Guardian]).
  launcher::Guardian guardian(cgroups.root());
  // Before any thread exists (the store server's), so every thread has the signals blocked.
  launcher::SignalWatcher signals;

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

  launcher::WorkerGroup group(o, signals, &guardian, &cgroups);
  if (o.ft) return run_ft(o, group, token);
  std::unique_ptr<parallel::TCPStoreServer> store;
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
    group.start(launcher::GroupEnv{o.master_addr, port, token, attempt});
    const launcher::GroupResult r = group.monitor();
    if (r.outcome == launcher::GroupResult::kSucceeded) return 0;
    if (r.outcome == launcher::GroupResult::kInterrupted) {
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
  launcher::LaunchOptions options;
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
