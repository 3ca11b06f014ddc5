// The tcp backend's shared-memory all_reduce (tcp/detail/shm.h, Note [Shared-memory all_reduce]
// in tcp/all_reduce.cpp): ranks as threads over a HashStore and as real processes. Closed-form
// results for every dtype, op and size at world sizes 2-4, also in many rounds of a tiny
// segment; the off switches; a bad option; ranks in different collectives, a hung peer, an
// aborting peer and a killed peer all fail with DistributedError naming the peer, never hang;
// no segment name is left in /dev/shm.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/ops/factory.h"
#include "parallel/distributed/hash_store.h"
#include "parallel/distributed/init.h"
#include "parallel/distributed/tcp/process_group_tcp.h"
#include "tests/parallel/process_group_test_util.h"
#include "tests/parallel/process_test_util.h"
#include "tests/parallel/tcp_groups.h"
#include "tests/support/error_text.h"

namespace ember::parallel {
namespace {

using Clock = std::chrono::steady_clock;
using test::Groups;
using test::make_groups;
using test::on_ranks;

ProcessGroupTCPOptions shm_options(int64_t timeout_ms = 20'000) { return test::tcp_options(timeout_ms, true); }

// Names in /dev/shm made by this process's groups.
std::vector<std::string> own_segment_names() {
  std::vector<std::string> names;
  const std::string prefix = "ember-tcp-" + std::to_string(::getpid()) + "-";
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d)) {
      if (std::string(e->d_name).rfind(prefix, 0) == 0) names.push_back(e->d_name);
    }
    ::closedir(d);
  }
  return names;
}

class TcpShmWorldSize : public ::testing::TestWithParam<int> {};

TEST_P(TcpShmWorldSize, EveryDtypeOpAndSizeHasClosedFormResults) {
  Groups groups = make_groups(GetParam(), shm_options());
  on_ranks(groups, [](ProcessGroupTCP& pg) {
    ASSERT_TRUE(pg.shared_memory_active());
    for (DType dtype : test::kDTypes) {
      for (ReduceOp op : test::kOps) {
        for (int64_t numel : test::kSizes) EXPECT_EQ(test::check_all_reduce(pg, dtype, numel, op), "");
      }
      EXPECT_EQ(test::check_all_reduce_many(pg, dtype), "");
    }
  });
}

TEST_P(TcpShmWorldSize, TinySegmentsRunManyRoundsWithTheSameResults) {
  // A 4 KiB data area: a 100003-element float64 all_reduce is ~196 rounds, the last partial,
  // each of them reusing the area the peers just read from.
  ProcessGroupTCPOptions o = shm_options();
  o.shm_bytes = 4096;
  Groups groups = make_groups(GetParam(), o);
  on_ranks(groups, [](ProcessGroupTCP& pg) {
    for (DType dtype : {kFloat32, kFloat64, kInt64}) {
      for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::MAX}) {
        for (int64_t numel : {int64_t{1024}, int64_t{1025}, int64_t{100003}})
          EXPECT_EQ(test::check_all_reduce(pg, dtype, numel, op), "");
      }
    }
  });
}

TEST_P(TcpShmWorldSize, SizesAroundTheOneRoundThresholdInAnyOrderHaveClosedFormResults) {
  // Up to 64 KiB (and half the data area) an all_reduce takes the one-round path of Note [Small
  // shared-memory all_reduce], in alternating halves of the area; above, the chunked rounds over
  // the whole area. Both sides of both limits, and back to back in both orders, so a round of
  // either kind follows one of the other kind.
  for (size_t shm_bytes : {size_t{4096}, size_t{4} << 20}) {
    ProcessGroupTCPOptions o = shm_options();
    o.shm_bytes = shm_bytes;
    const int64_t limit_bytes = static_cast<int64_t>(std::min<size_t>(shm_bytes / 2, 64 << 10));
    Groups groups = make_groups(GetParam(), o);
    on_ranks(groups, [limit_bytes](ProcessGroupTCP& pg) {
      for (DType dtype : test::kDTypes) {
        const int64_t limit = limit_bytes / static_cast<int64_t>(element_size(dtype));
        for (ReduceOp op : test::kOps) {
          for (int64_t numel : {limit, limit + 1, limit - 1, limit + 1, limit, int64_t{1}, 3 * limit, limit})
            EXPECT_EQ(test::check_all_reduce(pg, dtype, numel, op), "");
        }
        EXPECT_EQ(test::check_all_reduce_many(pg, dtype), "");
      }
    });
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, TcpShmWorldSize, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "_ranks"; });

TEST(TcpShm, OffByOptionOrEnvironmentAndTheOtherPathsStillReduce) {
  ProcessGroupTCPOptions off = shm_options();
  off.shared_memory = false;
  Groups groups = make_groups(2, off);
  on_ranks(groups, [](ProcessGroupTCP& pg) {
    EXPECT_FALSE(pg.shared_memory_active());
    EXPECT_EQ(test::check_all_reduce(pg, kFloat32, 1001, ReduceOp::SUM), "");     // TCP ring
    EXPECT_EQ(test::check_all_reduce(pg, kFloat32, 300007, ReduceOp::AVG), "");   // same-host copy
  });
  ::setenv("EMBER_TCP_SHM", "0", 1);
  Groups env_off = make_groups(2, shm_options());
  ::unsetenv("EMBER_TCP_SHM");
  on_ranks(env_off, [](ProcessGroupTCP& pg) { EXPECT_FALSE(pg.shared_memory_active()); });
  Groups on = make_groups(2, shm_options());
  on_ranks(on, [](ProcessGroupTCP& pg) { EXPECT_TRUE(pg.shared_memory_active()); });
}

TEST(TcpShm, ASegmentTooSmallIsAValueErrorNamingTheOption) {
  ProcessGroupTCPOptions o = shm_options();
  o.shm_bytes = 100;
  const std::string err = support::error_of<ValueError>([&] {
    ProcessGroupTCP pg(std::make_shared<HashStore>(), 0, 1, o);
  });
  EXPECT_NE(err.find("shm_bytes"), std::string::npos) << err;
  EXPECT_NE(err.find("100"), std::string::npos) << err;
  o.shared_memory = false;  // the size does not matter with the path off
  EXPECT_NO_THROW(ProcessGroupTCP(std::make_shared<HashStore>(), 0, 1, o));
}

TEST(TcpShm, NoSegmentNameOutlivesTheRendezvous) {
  {
    Groups groups = make_groups(3, shm_options());
    on_ranks(groups, [](ProcessGroupTCP& pg) {
      EXPECT_TRUE(pg.shared_memory_active());
      EXPECT_EQ(test::check_all_reduce(pg, kFloat32, 1000, ReduceOp::SUM), "");
    });
    // Mapped by every rank, named nowhere: the memory goes with the last mapping.
    EXPECT_EQ(own_segment_names(), std::vector<std::string>{});
  }
  EXPECT_EQ(own_segment_names(), std::vector<std::string>{});
}

TEST(TcpShm, RanksInDifferentCollectivesFailAtOnceNamingBoth) {
  Groups groups = make_groups(2, shm_options());
  std::vector<std::string> messages(2);
  const auto start = Clock::now();
  on_ranks(groups, [&](ProcessGroupTCP& pg) {
    Tensor t = zeros({8});
    auto work = pg.rank() == 0 ? pg.all_reduce(t) : pg.barrier();
    messages[pg.rank()] = support::error_of<DistributedError>([&] { work->wait(); });
    EXPECT_TRUE(pg.is_broken());
  });
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5)) << "waited for the 20 s timeout";
  EXPECT_NE(messages[0].find("rank 1 is running barrier #1 but this rank is running all_reduce #1"), std::string::npos)
      << messages[0];
  EXPECT_NE(messages[1].find("barrier #1"), std::string::npos) << messages[1];
}

TEST(TcpShm, DifferentSizesOrDtypesFailNamingBoth) {
  Groups groups = make_groups(2, shm_options());
  std::vector<std::string> messages(2);
  on_ranks(groups, [&](ProcessGroupTCP& pg) {
    Tensor t = pg.rank() == 0 ? zeros({10}) : zeros({11});
    messages[pg.rank()] = support::error_of<DistributedError>([&] { pg.all_reduce(t)->wait(); });
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(messages[r].find("is running all_reduce #1"), std::string::npos) << messages[r];
    EXPECT_NE(messages[r].find(r == 0 ? "44 bytes" : "40 bytes"), std::string::npos) << messages[r];
  }
}

TEST(TcpShm, HungPeerTimesOutNamingItAndTheCollective) {
  constexpr int64_t kTimeoutMs = 400;
  Groups groups = make_groups(2, shm_options(kTimeoutMs));
  std::string message;
  const auto start = Clock::now();
  message = support::error_of<DistributedError>([&] {
    Tensor t = zeros({1 << 16});
    groups[0]->all_reduce(t)->wait();  // rank 1 never calls it
  });
  const auto took = Clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(kTimeoutMs - 50));
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_NE(message.find("all_reduce #1"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1"), std::string::npos) << message;
  EXPECT_NE(message.find("timed out"), std::string::npos) << message;
  EXPECT_TRUE(groups[0]->is_broken());
}

TEST(TcpShm, AbortingPeerFailsTheWaitingRankWellBeforeTheTimeout) {
  Groups groups = make_groups(2, shm_options(/*timeout_ms=*/20'000));
  Tensor t = zeros({1000});
  const auto start = Clock::now();
  auto work = groups[0]->all_reduce(t);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  groups[1]->abort("the test gave up");
  const std::string err = support::error_of<DistributedError>([&] { work->wait(); });
  EXPECT_NE(err.find("rank 1"), std::string::npos) << err;
  EXPECT_NE(err.find("all_reduce #1"), std::string::npos) << err;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST(TcpShm, KilledPeerProcessIsADistributedErrorNotAHang) {
  constexpr int64_t kTimeoutMs = 20'000;
  auto results = test::run_ranks(2, [&](int rank) -> std::pair<int, std::string> {
    InitOptions o;
    o.timeout_ms = kTimeoutMs;
    auto pg = init_process_group("tcp", o);
    auto* tcp = dynamic_cast<ProcessGroupTCP*>(pg.get());
    if (tcp == nullptr || !tcp->shared_memory_active()) return {2, "the shared-memory path is off"};
    Tensor small = ones({16});
    pg->all_reduce(small)->wait();  // both are in step, through shared memory
    if (rank == 1) ::raise(SIGKILL);  // dies holding nothing: rank 0 waits for its round
    const auto start = Clock::now();
    try {
      Tensor t = ones({1 << 18});
      pg->all_reduce(t)->wait();
      return {3, "all_reduce succeeded without rank 1"};
    } catch (const DistributedError& e) {
      const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      if (took > kTimeoutMs / 4) return {4, "took " + std::to_string(took) + " ms: " + e.what()};
      return {0, e.what()};
    }
  });
  EXPECT_TRUE(WIFSIGNALED(results[1].status)) << results[1].describe();
  ASSERT_TRUE(results[0].exited_ok()) << results[0].describe();
  EXPECT_NE(results[0].message.find("all_reduce #2"), std::string::npos) << results[0].message;
  EXPECT_NE(results[0].message.find("rank 1 closed the connection"), std::string::npos) << results[0].message;
}

}  // namespace
}  // namespace ember::parallel
