// The tcp backend as real processes on 127.0.0.1: forked ranks call init_process_group("tcp")
// with the environment a launcher sets (rank 0 hosts the TCPStore), run the whole
// closed-form table, and survive peers that die (SIGKILL mid all_reduce) or hang (SIGSTOP):
// every other rank's pending collective fails with DistributedError naming the collective
// within the timeout. Also ember-run end to end (its own store, EMBER_STORE_TOKEN).
// Every test runs twice: on the ember TCPStore rank 0 hosts, and on a PyTorch TCPStore that
// a Python process hosts as torchrun's agent would (TORCHELASTIC_USE_AGENT_STORE=True; the
// ranks speak PyTorch's protocol through TorchTCPStore). The PyTorch runs skip, saying why,
// where /usr/bin/python3 has no torch.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/error.h"
#include "parallel/distributed/init.h"
#include "parallel/distributed/tcp/process_group_tcp.h"
#include "tests/parallel/process_group_test_util.h"
#include "tests/parallel/process_test_util.h"
#include "tests/parallel/torch_store_host.h"

namespace ember::parallel {
namespace {

using Clock = std::chrono::steady_clock;

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

enum class StoreKind { kEmber, kTorch };

std::string store_name(StoreKind k) { return k == StoreKind::kEmber ? "ember_store" : "torch_store"; }

// The store setup for one test: rank 0's ember store, or a fresh PyTorch store (or a skip).
test::StoreSetup store_setup(StoreKind kind, std::string* skip_reason) {
  if (kind == StoreKind::kEmber) return {};
  auto& host = test::TorchStoreHost::shared();
  *skip_reason = host.skip_reason();
  if (!skip_reason->empty()) return {};
  return {host.new_store(), {{"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RESTART_COUNT", "0"}}};
}

#define EMBER_STORE_SETUP(kind)                                         \
  std::string skip_reason;                                              \
  const test::StoreSetup store = store_setup((kind), &skip_reason);     \
  if (!skip_reason.empty()) GTEST_SKIP() << skip_reason

class TcpProcesses : public ::testing::TestWithParam<std::tuple<int, StoreKind>> {};

TEST_P(TcpProcesses, InitFromEnvironmentAndRunEveryCollective) {
  const int n = std::get<0>(GetParam());
  EMBER_STORE_SETUP(std::get<1>(GetParam()));
  auto results = test::run_ranks(n, [](int rank) -> std::pair<int, std::string> {
    InitOptions o;
    o.timeout_ms = 30'000;
    auto pg = init_process_group("tcp", o);
    if (pg->rank() != rank || pg->backend_name() != "tcp") return {2, "wrong rank or backend"};
    std::string err = test::run_all_checks(*pg, /*quick=*/true);
    pg->barrier()->wait();
    destroy_process_group();
    return {err.empty() ? 0 : 3, err};
  }, 60, {}, store);
  for (int r = 0; r < n; ++r) EXPECT_TRUE(results[r].exited_ok()) << "rank " << r << ": " << results[r].describe();
  if (store.port != 0) {  // the ranks met in the PyTorch store: a Python client sees their keys
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(test::TorchStoreHost::shared().python_get(store.port, "ember_pg/default/0/inits/" + std::to_string(r)),
                "1");
    }
  }
}

// Separate processes read each other's tensors (Note [Same-host all_reduce]) for all_reduces
// of 1 MiB and more: closed-form results for odd sizes, every op, float32 and float64.
TEST_P(TcpProcesses, LargeAllReducesTakeTheSameHostPathWithClosedFormResults) {
  const int n = std::get<0>(GetParam());
  EMBER_STORE_SETUP(std::get<1>(GetParam()));
  auto results = test::run_ranks(n, [n](int rank) -> std::pair<int, std::string> {
    // The copy between processes is the fallback of the shared-memory path (on by default,
    // tested in tcp_shm_test.cpp): turned off here, in this rank's process only.
    ::setenv("EMBER_TCP_SHM", "0", 1);
    InitOptions o;
    o.timeout_ms = 30'000;
    auto pg = init_process_group("tcp", o);
    auto* tcp = dynamic_cast<ProcessGroupTCP*>(pg.get());
    if (tcp == nullptr) return {2, "not a ProcessGroupTCP"};
    if (n > 1 && !tcp->same_host_copy_active()) return {4, "the same-host path is off"};
    if (tcp->shared_memory_active()) return {4, "EMBER_TCP_SHM=0 left shared memory on"};
    std::string err;
    for (DType dtype : {kFloat32, kFloat64})
      for (ReduceOp op : test::kOps)
        for (int64_t numel : {int64_t{262144}, int64_t{1000003}}) {
          if (err.empty()) err = test::check_all_reduce(*pg, dtype, numel, op);
        }
    pg->barrier()->wait();
    destroy_process_group();
    return {err.empty() ? 0 : 3, err};
  }, 60, {}, store);
  for (int r = 0; r < n; ++r) EXPECT_TRUE(results[r].exited_ok()) << "rank " << r << ": " << results[r].describe();
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, TcpProcesses,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(StoreKind::kEmber, StoreKind::kTorch)),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "_ranks_" +
                                  store_name(std::get<1>(info.param));
                         });

class TcpProcessFailure : public ::testing::TestWithParam<StoreKind> {};

TEST_P(TcpProcessFailure, KilledRankFailsEveryOtherRanksAllReduceQuickly) {
  EMBER_STORE_SETUP(GetParam());
  constexpr int kRanks = 3, kVictim = 1;
  constexpr int64_t kTimeoutMs = 20'000;
  auto results = test::run_ranks(kRanks, [&](int rank) -> std::pair<int, std::string> {
    InitOptions o;
    o.timeout_ms = kTimeoutMs;
    auto pg = init_process_group("tcp", o);
    Tensor warm = ones({4});
    pg->all_reduce(warm)->wait();  // everyone is connected and in step
    Tensor big = ones({16 << 20});  // 64 MiB: the collective is still in flight when the victim dies
    auto work = pg->all_reduce(big);
    if (rank == kVictim) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      ::raise(SIGKILL);
    }
    const auto start = Clock::now();
    try {
      work->wait();
      for (int i = 0; i < 5; ++i) pg->all_reduce(big)->wait();  // it may have finished just before
      return {3, "all_reduce succeeded without rank 1"};
    } catch (const DistributedError& e) {
      const int64_t took = ms_since(start);
      std::string msg = e.what();
      if (took > kTimeoutMs / 2) return {4, "took " + std::to_string(took) + " ms: " + msg};
      if (!pg->is_broken()) return {5, "group not marked broken: " + msg};
      try {
        pg->barrier()->wait();
        return {6, "a barrier on the broken group succeeded"};
      } catch (const DistributedError&) {
      }
      return {0, msg};
    }
  }, 60, {}, store);
  EXPECT_TRUE(WIFSIGNALED(results[kVictim].status)) << results[kVictim].describe();
  bool someone_named_the_victim = false;
  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    EXPECT_TRUE(results[r].exited_ok()) << "rank " << r << ": " << results[r].describe();
    EXPECT_NE(results[r].message.find("all_reduce"), std::string::npos) << results[r].message;
    EXPECT_NE(results[r].message.find("tcp rank " + std::to_string(r) + "/3"), std::string::npos) << results[r].message;
    someone_named_the_victim |= results[r].message.find("rank 1 ") != std::string::npos ||
                                results[r].message.find("rank 1:") != std::string::npos;
  }
  EXPECT_TRUE(someone_named_the_victim) << results[0].message << "\n" << results[2].message;
}

TEST_P(TcpProcessFailure, StoppedRankTimesOutTheOthersWithinTheTimeout) {
  EMBER_STORE_SETUP(GetParam());
  constexpr int64_t kTimeoutMs = 1500;
  auto results = test::run_ranks(
      2,
      [&](int rank) -> std::pair<int, std::string> {
        InitOptions o;
        o.timeout_ms = kTimeoutMs;
        auto pg = init_process_group("tcp", o);
        pg->barrier()->wait();
        if (rank == 1) {
          ::raise(SIGSTOP);  // hung: its sockets stay open, it just never answers
          return {0, ""};
        }
        Tensor t = ones({1 << 20});
        const auto start = Clock::now();
        try {
          pg->all_reduce(t)->wait();
          return {3, "all_reduce finished with rank 1 stopped"};
        } catch (const DistributedError& e) {
          const int64_t took = ms_since(start);
          if (took < kTimeoutMs - 100 || took > kTimeoutMs + 3000)
            return {4, "failed after " + std::to_string(took) + " ms: " + e.what()};
          return {0, e.what()};
        }
      },
      60, /*kill_when_others_done=*/{1}, store);
  EXPECT_TRUE(results[0].exited_ok()) << results[0].describe();
  EXPECT_NE(results[0].message.find("timed out"), std::string::npos) << results[0].message;
  EXPECT_NE(results[0].message.find("rank 1"), std::string::npos) << results[0].message;
  EXPECT_NE(results[0].message.find("all_reduce #2"), std::string::npos) << results[0].message;
}

TEST_P(TcpProcessFailure, RankThatNeverComesFailsRendezvous) {
  EMBER_STORE_SETUP(GetParam());
  auto results = test::run_ranks(2, [](int rank) -> std::pair<int, std::string> {
    if (rank == 1) return {0, ""};  // exits without joining
    InitOptions o;
    o.timeout_ms = 1000;
    try {
      init_process_group("tcp", o);
      return {3, "rendezvous succeeded without rank 1"};
    } catch (const Error& e) {
      return {0, e.what()};
    }
  }, 60, {}, store);
  EXPECT_TRUE(results[0].exited_ok()) << results[0].describe();
}

INSTANTIATE_TEST_SUITE_P(Stores, TcpProcessFailure, ::testing::Values(StoreKind::kEmber, StoreKind::kTorch),
                         [](const auto& info) { return store_name(info.param); });

#ifdef EMBER_RUN_PATH
TEST(TcpProcesses, EmberRunLaunchesWorkersThatRendezvousThroughItsStore) {
  const std::string cmd = std::string(EMBER_RUN_PATH) + " --nproc-per-node 3 " + EMBER_PG_WORKER + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, got);
  const int status = ::pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  for (int r = 0; r < 3; ++r) EXPECT_NE(out.find("rank " + std::to_string(r) + "/3 ok"), std::string::npos) << out;
}
#endif

}  // namespace
}  // namespace ember::parallel
