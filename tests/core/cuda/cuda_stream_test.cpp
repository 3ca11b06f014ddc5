// Streams (core/stream.h, Note [Current stream]) and CUDA error reporting (Note [CUDA error
// reporting]): the current stream per thread and device, StreamGuard, ops and cuBLAS on a side
// stream, and errors naming the call and the last kernel. The parts that need no GPU run
// everywhere in a CUDA build; the rest skip without a device. (Under */cuda/: it includes
// core/cuda/cuda_check.h.)
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "core/cuda/cuda_check.h"
#include "core/device.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "core/stream.h"
#include "tests/support/cuda.h"

namespace ember {
namespace {
using namespace native;

using test_support::kGpu;

TEST(CudaStream, CpuDevicesHaveOnlyTheirDefaultStream) {
  EXPECT_TRUE(current_stream(Device::cpu(1)).is_default());
  EXPECT_EQ(new_stream(Device::cpu()), Stream(Device::cpu(), 0));
  EXPECT_THROW(set_current_stream(Stream(Device::cpu(), 5)), Error);
  Stream(Device::cpu()).synchronize();
  EXPECT_TRUE(Stream(Device::cpu()).query());
}

TEST(CudaStream, ANonexistentDeviceIsAClearError) {
  const int n = cuda_device_count();
  try {
    new_stream(Device::cuda(n));
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
}

TEST(CudaStream, CudaErrorsNameTheCallAndTheErrorWithoutAGpu) {
  try {
    EMBER_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "expected Error";
  } catch (const OutOfMemoryError& e) {
    FAIL() << "not an out-of-memory error: " << e.what();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("(cudaErrorInvalidValue) in `cudaErrorInvalidValue`"), std::string::npos) << what;
  }
  EXPECT_THROW(EMBER_CUDA_CHECK(cudaErrorMemoryAllocation), OutOfMemoryError);
}

TEST(CudaStream, GuardSetsAndRestoresTheCurrentStreamPerThread) {
  EMBER_REQUIRE_CUDA();
  const Stream side = new_stream(kGpu);
  EXPECT_FALSE(side.is_default());
  EXPECT_TRUE(current_stream(kGpu).is_default());
  {
    StreamGuard guard(side);
    EXPECT_EQ(current_stream(kGpu), side);
    std::thread([&] { EXPECT_TRUE(current_stream(kGpu).is_default()) << "per thread"; }).join();
  }
  EXPECT_TRUE(current_stream(kGpu).is_default());
}

TEST(CudaStream, OpsAndCublasOnASideStreamMatchTheDefaultStream) {
  EMBER_REQUIRE_CUDA();
  Tensor a = randn({64, 33}), b = randn({33, 17});
  Tensor want = matmul(a, b);
  const Stream side = new_stream(kGpu);
  Tensor got;
  {
    StreamGuard guard(side);
    Tensor da = to(a, kGpu), db = to(b, kGpu);
    got = softmax(add(matmul(da, db), 1.0), 1);
    side.synchronize();
    EXPECT_TRUE(side.query());
  }
  const auto g = got.to_vector<double>(), w = softmax(add(want, 1.0), 1).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-5) << i;
}

}  // namespace
}  // namespace ember
