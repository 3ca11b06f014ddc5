// The nccl backend (CUDA builds only): ranks as threads, one GPU each, over a shared
// HashStore; the closed-form table of process_group_test_util.h on CUDA tensors, CPU tensors
// rejected, and a missing rank failing rendezvous within the timeout. Skips without a GPU;
// the two-rank tests skip with fewer than two.
#include <gtest/gtest.h>

#include <thread>

#include "core/device.h"
#include "core/error.h"
#include "parallel/distributed/hash_store.h"
#include "parallel/distributed/nccl/process_group_nccl.h"
#include "tests/parallel/process_group_test_util.h"

namespace ember::parallel {
namespace {

// Runs body(group) on n threads, rank r on cuda:r.
void on_gpus(int n, const std::function<void(ProcessGroupNCCL&)>& body) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        test::t_device = Device::cuda(r);
        ProcessGroupNCCLOptions o;
        o.device = r;
        o.timeout_ms = 60'000;
        ProcessGroupNCCL pg(store, r, n, o);
        body(pg);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  for (auto& t : threads) t.join();
}

TEST(ProcessGroupNCCL, OneRankRunsTheTable) {
  if (cuda_device_count() < 1) GTEST_SKIP() << "no CUDA device";
  on_gpus(1, [](ProcessGroupNCCL& pg) {
    EXPECT_EQ(pg.backend_name(), "nccl");
    EXPECT_EQ(test::run_all_checks(pg, /*quick=*/true), "");
  });
}

TEST(ProcessGroupNCCL, TwoRanksRunTheTable) {
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  on_gpus(2, [](ProcessGroupNCCL& pg) { EXPECT_EQ(test::run_all_checks(pg, /*quick=*/true), ""); });
}

TEST(ProcessGroupNCCL, CpuTensorsAreRejected) {
  if (cuda_device_count() < 1) GTEST_SKIP() << "no CUDA device";
  on_gpus(1, [](ProcessGroupNCCL& pg) { EXPECT_THROW(pg.all_reduce(zeros({4})), ValueError); });
}

TEST(ProcessGroupNCCL, MissingRankFailsRendezvousWithinTheTimeout) {
  if (cuda_device_count() < 1) GTEST_SKIP() << "no CUDA device";
  auto store = std::make_shared<HashStore>();
  ProcessGroupNCCLOptions o;
  o.device = 0;
  o.timeout_ms = 2000;
  // Rank 0 of 2 alone: ncclCommInitRank never completes; the non-blocking init gives up.
  EXPECT_THROW(ProcessGroupNCCL(store, 0, 2, o), DistributedError);
}

}  // namespace
}  // namespace ember::parallel
