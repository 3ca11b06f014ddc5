// The tcp backend on CUDA tensors (CUDA builds only), staged through the host (Note [Host
// staging]): two ranks as threads sharing cuda:0 (what NCCL refuses), the closed-form checks of
// process_group_test_util.h for every collective, results on the GPU; send/recv of a CUDA tensor
// a ValueError; a collective queued right after a kernel sees that kernel's values. Skips
// without a GPU.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/stream.h"
#include "parallel/distributed/hash_store.h"
#include "parallel/distributed/tcp/process_group_tcp.h"
#include "tests/parallel/process_group_test_util.h"

namespace ember::parallel {
namespace {

// Runs body(group) on n threads, every rank on cuda:0.
void on_gpu0(int n, const std::function<void(ProcessGroupTCP&)>& body) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        test::t_device = Device::cuda(0);
        ProcessGroupTCPOptions o;
        o.host = "127.0.0.1";
        o.timeout_ms = 60'000;
        ProcessGroupTCP pg(store, r, n, o);
        body(pg);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  for (auto& t : threads) t.join();
}

TEST(ProcessGroupTCPCuda, TwoRanksOnOneGpuRunEveryCollective) {
  if (cuda_device_count() < 1) GTEST_SKIP() << "no CUDA device";
  on_gpu0(2, [](ProcessGroupTCP& pg) {
    std::string err;
    auto keep = [&](std::string e) {
      if (err.empty() && !e.empty()) err = std::move(e);
    };
    for (DType dtype : {kFloat32, kInt64}) {
      for (int64_t numel : {int64_t{0}, int64_t{7}, int64_t{100003}}) {
        for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MAX}) {
          keep(test::check_all_reduce(pg, dtype, numel, op));
          keep(test::check_reduce(pg, dtype, numel, 1, op));
          keep(test::check_reduce_scatter(pg, dtype, numel, op));
        }
        for (int root = 0; root < pg.size(); ++root) keep(test::check_broadcast(pg, dtype, numel, root));
        keep(test::check_all_gather(pg, dtype, numel));
      }
      keep(test::check_all_reduce_many(pg, dtype));
    }
    EXPECT_EQ(err, "");
  });
}

TEST(ProcessGroupTCPCuda, ResultsStayOnTheGpu) {
  if (cuda_device_count() < 1) GTEST_SKIP() << "no CUDA device";
  on_gpu0(2, [](ProcessGroupTCP& pg) {
    Tensor t = full({16}, pg.rank() + 1.0, TensorOptions(kFloat32).device(Device::cuda(0)));
    pg.all_reduce(t)->wait();
    EXPECT_EQ(t.device(), Device::cuda(0));
    EXPECT_EQ(native::to(t, Device::cpu()).to_vector<float>(), std::vector<float>(16, 3.0f));
  });
}

TEST(ProcessGroupTCPCuda, ACollectiveSeesTheKernelQueuedBeforeItOnANonDefaultStream) {
  // The staged copy runs on the worker's thread: without waiting for the caller's stream it
  // could read the tensor before the fill below has run.
  if (cuda_device_count() < 1) GTEST_SKIP() << "no CUDA device";
  on_gpu0(2, [](ProcessGroupTCP& pg) {
    StreamGuard guard(new_stream(Device::cuda(0)));
    Tensor t = zeros({1 << 22}, TensorOptions(kFloat32).device(Device::cuda(0)));
    native::fill_(t, pg.rank() + 1.0);
    pg.all_reduce(t)->wait();
    current_stream(Device::cuda(0)).synchronize();
    Tensor h = native::to(t, Device::cpu());
    EXPECT_EQ(native::amin(h).item(), 3.0);
    EXPECT_EQ(native::amax(h).item(), 3.0);
  });
}

TEST(ProcessGroupTCPCuda, SendRecvOfACudaTensorIsAValueError) {
  if (cuda_device_count() < 1) GTEST_SKIP() << "no CUDA device";
  on_gpu0(2, [](ProcessGroupTCP& pg) {
    Tensor t = zeros({4}, TensorOptions(kFloat32).device(Device::cuda(0)));
    if (pg.rank() == 0) {
      EXPECT_THROW(pg.send(t, 1), ValueError);
    } else {
      EXPECT_THROW(pg.recv(t, 0), ValueError);
    }
  });
}

}  // namespace
}  // namespace ember::parallel
