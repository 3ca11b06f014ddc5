// The nccl backend (CUDA builds only): ranks as threads, one GPU each, over a shared
// HashStore; the closed-form table of process_group_test_util.h on CUDA tensors, CPU tensors
// rejected, and a missing rank failing rendezvous within the timeout; the regressions of issue
// 16's review (end event on the group's device, barrier ordering, bounded destructor,
// LOCAL_RANK % device_count, Work::wait ordering the caller's stream, the start event on the
// caller's stream); on one GPU a one-rank group: the table, stream ordering, and the watchdog's
// abort of an overdue collective with a new group working after it. Skips without a GPU; the
// two-rank tests skip with fewer than two (NCCL refuses two ranks on one GPU), and the ordering
// tests run with one rank, then with two where two GPUs exist.
#include <gtest/gtest.h>

#include <thread>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <future>

#include "core/device.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/stream.h"
#include "parallel/distributed/hash_store.h"
#include "parallel/distributed/nccl/process_group_nccl.h"
#include "tests/parallel/process_group_test_util.h"
#include "tests/support/error_text.h"

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

// The world sizes the devices allow among 1 and 2.
std::vector<int> world_sizes() { return cuda_device_count() >= 2 ? std::vector<int>{1, 2} : std::vector<int>{1}; }

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

TEST(ProcessGroupNCCL, SecondRanksFirstCollectiveFromAThreadOnAnotherDevice) {
  // Regression: the Work's end event was created on the calling thread's current device (0 for
  // a fresh thread) and recorded on rank 1's stream on cuda:1, which fails.
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  on_gpus(2, [](ProcessGroupNCCL& pg) {
    Tensor t = full({8}, pg.rank() + 1.0, TensorOptions(kFloat32).device(Device::cuda(pg.device())));
    pg.all_reduce(t)->wait();
    EXPECT_EQ(native::to(t, Device::cpu()).to_vector<float>(), std::vector<float>(8, 3.0f));
  });
}

TEST(ProcessGroupNCCL, BarrierIsOrderedAfterTheCallersWork) {
  // Regression: the barrier's buffer was zeroed on the caller's stream after the start event.
  if (cuda_device_count() < 1) GTEST_SKIP() << "no CUDA device";
  for (int n : world_sizes()) {
    SCOPED_TRACE(std::to_string(n) + " rank(s)");
    on_gpus(n, [n](ProcessGroupNCCL& pg) {
      for (int i = 0; i < 50; ++i) pg.barrier()->wait();
      Tensor t = full({1}, 1.0, TensorOptions(kFloat32).device(Device::cuda(pg.device())));
      pg.all_reduce(t)->wait();
      EXPECT_EQ(t.item(), static_cast<double>(n));
    });
  }
}

TEST(ProcessGroupNCCL, DestructorIsBoundedWhenAPeerNeverJoins) {
  // Regression: an unbounded cudaStreamSynchronize in the destructor hung on a collective the
  // peer never joined. Rank 1 skips the all_reduce; rank 0 destroys its group at once.
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  auto store = std::make_shared<HashStore>();
  std::promise<void> rank0_done;
  auto done = rank0_done.get_future();
  std::thread rank1([&] {
    ProcessGroupNCCLOptions o;
    o.device = 1;
    o.timeout_ms = 3000;
    ProcessGroupNCCL pg(store, 1, 2, o);
    done.wait_for(std::chrono::seconds(120));
  });
  auto destroyed = std::async(std::launch::async, [&] {
    ProcessGroupNCCLOptions o;
    o.device = 0;
    o.timeout_ms = 3000;
    auto pg = std::make_unique<ProcessGroupNCCL>(store, 0, 2, o);
    Tensor t = ones({1024}, TensorOptions(kFloat32).device(Device::cuda(0)));
    auto w = pg->all_reduce(t);
    pg.reset();  // must come back: bounded by timeout_ms, then the communicator is aborted
  });
  EXPECT_EQ(destroyed.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  rank0_done.set_value();
  rank1.join();
  if (destroyed.valid()) destroyed.get();
}

TEST(ProcessGroupNCCL, LocalRankIsTakenModuloTheDeviceCount) {
  // Regression: LOCAL_RANK was the device index unmodified; with CUDA_VISIBLE_DEVICES showing a
  // rank only its own GPU, LOCAL_RANK=count asked for a device that does not exist.
  const int count = cuda_device_count();
  if (count < 1) GTEST_SKIP() << "no CUDA device";
  const char* old = std::getenv("LOCAL_RANK");
  const std::string saved = old ? old : "";
  ::setenv("LOCAL_RANK", std::to_string(count).c_str(), 1);
  auto store = std::make_shared<HashStore>();
  ProcessGroupNCCLOptions o;  // device -1: from LOCAL_RANK
  o.timeout_ms = 60'000;
  try {
    ProcessGroupNCCL pg(store, 0, 1, o);
    EXPECT_EQ(pg.device(), 0);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  if (old) ::setenv("LOCAL_RANK", saved.c_str(), 1); else ::unsetenv("LOCAL_RANK");
}

TEST(ProcessGroupNCCL, WaitOrdersTheCallersCurrentStream) {
  // Work::wait makes the caller's current stream wait for the operation's event, so work queued
  // on a non-default stream after wait() reads the reduced values; and the operation starts after
  // the work queued on that stream before it (the `full`), since its start event is recorded on
  // the caller's current stream (regression: on the legacy default stream, which does not order
  // ember's non-blocking pool streams).
  if (cuda_device_count() < 1) GTEST_SKIP() << "no CUDA device";
  for (int n : world_sizes()) {
    SCOPED_TRACE(std::to_string(n) + " rank(s)");
    on_gpus(n, [n](ProcessGroupNCCL& pg) {
      const Device d = Device::cuda(pg.device());
      StreamGuard guard(new_stream(d));
      Tensor t = full({1 << 20}, pg.rank() + 1.0, TensorOptions(kFloat32).device(d));
      pg.all_reduce(t)->wait();
      Tensor doubled = native::mul(t, 2.0);  // on the current (non-default) stream
      current_stream(d).synchronize();
      // Rank r sends r + 1: the sum is n(n + 1)/2 per element.
      EXPECT_EQ(native::sum(native::to(doubled, Device::cpu())).item(), 2.0 * (n * (n + 1) / 2) * (1 << 20));
    });
  }
}

TEST(ProcessGroupNCCL, OneRankWatchdogAbortsAnOverdueCollectiveAndANewGroupWorks) {
  // The caller's stream holds several timeouts' worth of matrix products, so the all_reduce
  // queued behind them (its start event is on that stream) is overdue: the watchdog aborts the
  // communicator, the Work fails with a DistributedError naming the timeout and the group says
  // it is broken. A group made afterwards on the same device works.
  if (cuda_device_count() < 1) GTEST_SKIP() << "no CUDA device";
  const Device d = Device::cuda(0);
  ProcessGroupNCCLOptions o;
  o.device = 0;
  o.timeout_ms = 60'000;
  { ProcessGroupNCCL warm(std::make_shared<HashStore>(), 0, 1, o); }  // CUDA and NCCL set up outside the timeout
  // How long one product takes here, so that the queue outlasts the timeout on any GPU.
  Tensor a = native::div(ones({4096, 4096}, TensorOptions(kFloat32).device(d)), 4096.0);
  Tensor b = native::mm(a, a);
  current_stream(d).synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 4; ++i) b = native::mm(b, a);
  current_stream(d).synchronize();
  const double one_ms =
      std::max(0.05, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 4);
  o.timeout_ms = 500;
  {
    ProcessGroupNCCL pg(std::make_shared<HashStore>(), 0, 1, o);
    const int products = static_cast<int>(std::min(200000.0, 4 * o.timeout_ms / one_ms)) + 8;
    for (int i = 0; i < products; ++i) b = native::mm(b, a);
    Tensor t = full({16}, 1.0, TensorOptions(kFloat32).device(d));
    auto w = pg.all_reduce(t);
    const std::string err = support::error_of<DistributedError>([&] { w->wait(); });
    EXPECT_NE(err.find("not finished within 500 ms"), std::string::npos) << err;
    EXPECT_TRUE(pg.is_broken());
    EXPECT_NE(pg.broken_reason().find("not finished within"), std::string::npos) << pg.broken_reason();
    EXPECT_THROW(pg.all_reduce(t)->wait(), DistributedError) << "a broken group refuses new work";
    current_stream(d).synchronize();
  }
  o.timeout_ms = 60'000;
  ProcessGroupNCCL fresh(std::make_shared<HashStore>(), 0, 1, o);
  Tensor t = full({16}, 3.0, TensorOptions(kFloat32).device(d));
  fresh.all_reduce(t)->wait();
  fresh.broadcast(t, 0)->wait();
  EXPECT_EQ(native::to(t, Device::cpu()).to_vector<float>(), std::vector<float>(16, 3.0f));
  EXPECT_FALSE(fresh.is_broken());
}

}  // namespace
}  // namespace ember::parallel
