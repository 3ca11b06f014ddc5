// ft::Manager with ranks as threads over a TCPStoreServer on loopback (the launcher's part, marking
// a dead rank's heartbeat, is played by the test). Each step sums a global batch of 12 values
// split over the step's participants, so the committed state is the same whatever the
// membership: a dropped and redone step shows up as equal state, a step applied twice or lost as
// a different one.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "core/ops/factory.h"
#include "parallel/distributed/tcp_store.h"
#include "parallel/distributed/tcp_store_server.h"
#include "parallel/ft/keys.h"
#include "parallel/ft/manager.h"

namespace {

using namespace ember;
using namespace ember::parallel;
using Clock = std::chrono::steady_clock;

constexpr int kItems = 12;

// w after `steps` committed steps: step s adds (s + 1) * (1 + 2 + ... + 12) * [1, 2, 3, 4].
std::vector<double> expected_state(int64_t steps) {
  double total = 0;
  for (int64_t s = 0; s < steps; ++s) total += double(s + 1) * 78.0;
  return {total, 2 * total, 3 * total, 4 * total};
}

struct Job {
  std::unique_ptr<TCPStoreServer> server;
  std::string token = make_store_token();
  std::mutex mutex;
  std::vector<std::string> log;  // guarded by mutex

  Job() {
    TCPStoreServerOptions so;
    so.bind_address = "127.0.0.1";
    so.token = token;
    server = std::make_unique<TCPStoreServer>(so);
  }
  std::shared_ptr<Store> client() {
    TCPStoreOptions co;
    co.token = token;
    co.timeout_ms = 5000;
    co.wait_for_workers = false;
    return std::make_shared<TCPStore>("127.0.0.1", server->port(), co);
  }
  bool logged(const std::string& part) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& l : log)
      if (l.find(part) != std::string::npos) return true;
    return false;
  }
  std::string all_log() {
    std::lock_guard<std::mutex> lock(mutex);
    std::string s;
    for (const auto& l : log) s += l + "\n";
    return s;
  }
};

// One rank's run: its state, what it committed, and how it ended.
struct Rank {
  int slot = 0;
  int64_t incarnation = 0;
  Tensor w = zeros({4}, kFloat64);
  std::vector<int64_t> committed;           // the step index of every commit, in order
  std::vector<std::vector<double>> states;  // w after each commit
  std::vector<int> sizes;                   // participants of each committed step
  bool recovered = false;
  bool finished_early = false;
  std::string error;
};

struct RunOptions {
  int max_replicas = 3;
  int min_replicas = 1;
  int64_t steps = 12;
  int64_t die_at = -1;  // this rank vanishes in the middle of that step
  int64_t step_sleep_ms = 0;
  int64_t quorum_timeout_ms = 20'000;
};

void run_rank(Job& job, Rank& r, const RunOptions& ro) {
  try {
    ft::ManagerOptions o;
    o.store = job.client();
    o.monitor_store = job.client();
    o.replica_id = r.slot;
    o.incarnation = r.incarnation;
    o.max_replicas = ro.max_replicas;
    o.min_replicas = ro.min_replicas;
    o.timeout_ms = 2000;
    o.quorum_timeout_ms = ro.quorum_timeout_ms;
    o.heartbeat_interval_ms = 20;
    o.group_options.shared_memory = false;
    o.group_options.same_host_copy = false;
    o.state_dict = [&r] { return ft::StateDict{{{"w", r.w}}, {{"note", "hello"}}}; };
    o.load_state_dict = [&r](const ft::StateDict& s) {
      ASSERT_EQ(s.tensors.size(), 1u);
      ASSERT_EQ(s.metadata.at("note"), "hello");
      r.w = s.tensors[0].second.clone();
    };
    o.log = [&job](const std::string& line) {
      std::lock_guard<std::mutex> lock(job.mutex);
      job.log.push_back(line);
    };
    auto store = o.store;
    auto m = std::make_unique<ft::Manager>(o);
    while (m->current_step() < ro.steps) {
      const bool ok = m->start_quorum();
      if (m->finished()) {
        r.finished_early = true;
        return;
      }
      r.recovered = r.recovered || m->recovered();
      const int64_t step = m->current_step();
      if (step == ro.die_at) {
        // Vanish mid-step: the group's connections close, the heartbeat stops, and the launcher
        // marks the incarnation dead.
        m.reset();
        store->set(ft::heartbeat_key(r.slot), ft::dead_heartbeat(r.incarnation));
        return;
      }
      Tensor g = zeros({4}, kFloat64);
      if (ok) {
        try {
          const int n = m->num_participants(), k = m->rank();
          double sum = 0;
          for (int i = k * kItems / n; i < (k + 1) * kItems / n; ++i) sum += double(step + 1) * (i + 1);
          g = from_vector(std::vector<double>{sum, 2 * sum, 3 * sum, 4 * sum}, {4});
          if (ro.step_sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(ro.step_sleep_ms));
          m->process_group()->all_reduce(g)->wait();
        } catch (const DistributedError& e) {
          m->report_error(e.what());
        }
      }
      if (m->should_commit()) {
        r.w.add_(g);
        r.committed.push_back(step);
        r.states.push_back(r.w.to_vector<double>());
        r.sizes.push_back(m->num_participants());
      }
    }
    m->finish();
  } catch (const std::exception& e) {
    r.error = e.what();
  }
}

// Every rank's commits are consecutive from its first, each state is what that many steps give.
void expect_consistent(const Rank& r, int64_t steps) {
  EXPECT_TRUE(r.error.empty()) << "slot " << r.slot << ": " << r.error;
  ASSERT_FALSE(r.committed.empty()) << "slot " << r.slot;
  for (size_t i = 0; i < r.committed.size(); ++i) {
    EXPECT_EQ(r.committed[i], r.committed[0] + int64_t(i)) << "slot " << r.slot << " skipped or repeated a step";
    EXPECT_EQ(r.states[i], expected_state(r.committed[i] + 1)) << "slot " << r.slot << " after step " << r.committed[i];
  }
  EXPECT_EQ(r.committed.back(), steps - 1) << "slot " << r.slot;
  EXPECT_EQ(r.w.to_vector<double>(), expected_state(steps)) << "slot " << r.slot;
}

TEST(FtManager, UndisturbedRanksCommitEveryStepOnce) {
  Job job;
  RunOptions ro;
  std::vector<Rank> ranks(3);
  std::vector<std::thread> threads;
  for (int s = 0; s < 3; ++s) {
    ranks[s].slot = s;
    threads.emplace_back([&, s] { run_rank(job, ranks[s], ro); });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : ranks) {
    expect_consistent(r, ro.steps);
    EXPECT_EQ(r.committed.front(), 0);
    for (int n : r.sizes) EXPECT_EQ(n, 3);
  }
}

TEST(FtManager, DeadRankIsDroppedAndReplacementGetsStateFromAPeer) {
  Job job;
  RunOptions ro;
  ro.steps = 40;
  ro.step_sleep_ms = 10;
  std::vector<Rank> ranks(4);
  std::vector<std::thread> threads;
  for (int s = 0; s < 3; ++s) {
    ranks[s].slot = s;
    RunOptions mine = ro;
    if (s == 1) mine.die_at = 5;
    threads.emplace_back([&, s, mine] { run_rank(job, ranks[s], mine); });
  }
  threads[1].join();
  // The survivors go on with two ranks; then slot 1 comes back as incarnation 1 with nothing.
  const auto t0 = Clock::now();
  while (!job.logged("ranks (slots 0, 2)") && Clock::now() - t0 < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(job.logged("ranks (slots 0, 2)")) << job.all_log();
  ranks[3].slot = 1;
  ranks[3].incarnation = 1;
  threads[1] = std::thread([&] { run_rank(job, ranks[3], ro); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ranks[1].committed.size(), 5u);
  expect_consistent(ranks[0], ro.steps);
  expect_consistent(ranks[2], ro.steps);
  EXPECT_TRUE(ranks[3].recovered) << job.all_log();
  expect_consistent(ranks[3], ro.steps);
  EXPECT_GT(ranks[3].committed.front(), 5);
  // The survivors ran steps with 2 ranks, then with 3 again.
  const auto& sizes = ranks[0].sizes;
  EXPECT_NE(std::find(sizes.begin(), sizes.end(), 2), sizes.end());
  EXPECT_EQ(sizes.back(), 3);
  EXPECT_TRUE(job.logged("slot 1 died")) << job.all_log();
  EXPECT_TRUE(job.logged("no checkpoint read")) << job.all_log();
}

TEST(FtManager, BelowMinimumFailsNamingTheMissingSlot) {
  Job job;
  RunOptions ro;
  ro.min_replicas = 3;
  ro.quorum_timeout_ms = 500;
  std::vector<Rank> ranks(2);
  std::vector<std::thread> threads;
  for (int s = 0; s < 2; ++s) {
    ranks[s].slot = s;
    threads.emplace_back([&, s] { run_rank(job, ranks[s], ro); });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : ranks) {
    EXPECT_NE(r.error.find("below the minimum of 3"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("missing rank slot(s) 2"), std::string::npos) << r.error;
  }
}

TEST(FtManager, LostStoreIsAnErrorWithinTheTimeoutNotAHang) {
  Job job;
  RunOptions ro;
  ro.max_replicas = 2;
  ro.steps = 1'000'000;
  ro.step_sleep_ms = 5;
  std::vector<Rank> ranks(2);
  std::vector<std::thread> threads;
  for (int s = 0; s < 2; ++s) {
    ranks[s].slot = s;
    threads.emplace_back([&, s] { run_rank(job, ranks[s], ro); });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto t0 = Clock::now();
  job.server.reset();
  for (auto& t : threads) t.join();
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  for (const auto& r : ranks) {
    EXPECT_NE(r.error.find("store"), std::string::npos) << r.error;
    EXPECT_FALSE(r.committed.empty());
  }
  EXPECT_LT(waited, 10'000);
}

TEST(FtManager, RejectsBadOptions) {
  ft::ManagerOptions o;
  EXPECT_THROW(ft::Manager{o}, ValueError);
}

}  // namespace
