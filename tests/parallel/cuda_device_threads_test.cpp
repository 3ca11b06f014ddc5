// The CUDA side of device-owning threads (Note [Device-owning threads] in core/thread_device.h): a
// replica thread and the engine's worker for cuda:0 have it current (cudaGetDevice) and run
// their work under the stream the calling thread had current on cuda:0. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <vector>

#include "autograd/ops.h"
#include "core/ops/factory.h"
#include "core/stream.h"
#include "core/thread_device.h"
#include "parallel/parallel_apply.h"
#include "tests/support/cuda.h"

namespace ember {
namespace {
using test_support::kGpu;

int cuda_current_device() {
  int d = -1;
  EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
  return d;
}

TEST(CudaDeviceThreads, ReplicasRunOnTheirDeviceUnderTheCallersStream) {
  EMBER_REQUIRE_CUDA();
  const Stream s = new_stream(kGpu);
  StreamGuard guard(s);
  std::vector<Stream> streams(2, Stream());
  std::vector<int> current(2, -1);
  std::vector<std::optional<Device>> owned(2);
  std::vector<std::function<void()>> fns;
  for (size_t i = 0; i < 2; ++i) {
    fns.push_back([&, i] {
      streams[i] = current_stream(kGpu);
      current[i] = cuda_current_device();
      owned[i] = thread_device();
    });
  }
  parallel::parallel_run(fns, {kGpu, kGpu});
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(streams[i], s) << "replica " << i;
    EXPECT_EQ(current[i], 0) << "replica " << i;
    EXPECT_EQ(owned[i], kGpu) << "replica " << i;
  }
}

TEST(CudaDeviceThreads, EngineWorkerRunsOnItsDeviceUnderTheCallersStream) {
  EMBER_REQUIRE_CUDA();
  const Stream s = new_stream(kGpu);
  StreamGuard guard(s);
  Tensor x = ones({4}, TensorOptions().device(kGpu).requires_grad(true));
  Tensor y = mul(x, 3.0);
  std::optional<Stream> seen;
  std::optional<Device> owned;
  int current = -1;
  y.register_hook([&](const Tensor&) {
    seen = current_stream(kGpu);
    owned = thread_device();
    current = cuda_current_device();
    return Tensor();
  });
  sum(to(y, Device::cpu())).backward();
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(*seen, s);
  EXPECT_EQ(owned, kGpu);
  EXPECT_EQ(current, 0);
  EXPECT_EQ(to(x.grad(), Device::cpu()).to_vector<float>(), std::vector<float>({3, 3, 3, 3}));
}

}  // namespace
}  // namespace ember
