// Streams (core/stream.h, Note [Current stream]) and CUDA error reporting (Note [CUDA error
// reporting]): the current stream per thread and device, StreamGuard, ops and cuBLAS on a side
// stream, copies between devices ordered with both sides' current streams (Note [Copies between
// devices]), and errors naming the call and the last kernel. The parts that need no GPU run
// everywhere in a CUDA build; the rest skip without a device. (Under */cuda/: it includes
// core/cuda/cuda_check.h.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <utility>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_peer_copy.h"
#include "core/device.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "core/stream.h"
#include "tests/support/cuda.h"
#include "tests/support/error_text.h"

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
  // "does not exist" with a GPU, "is not available" without one (core/device.cpp); both name
  // the device and how many are visible.
  const std::string what = support::error_of<DeviceError>([&] { new_stream(Device::cuda(n)); });
  EXPECT_NE(what.find("new_stream: cuda:" + std::to_string(n) + " "), std::string::npos) << what;
  EXPECT_NE(what.find(std::to_string(n) + " CUDA device(s) are visible"), std::string::npos) << what;
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


// Work queued on the calling thread's current stream of `d` that makes `t`'s final values late:
// `rounds` in-place passes that leave (t + 1) * 2 behind.
Tensor produce(const Tensor& host, Device d, int rounds) {
  Tensor t = to(host, d);
  for (int i = 0; i < rounds; ++i) add_(t, 1.0);
  add_(t, static_cast<double>(1 - rounds));
  return mul(t, 2.0);
}

void expect_values(const Tensor& got, const Tensor& want, const char* what) {
  const auto g = got.to_vector<float>(), w = want.to_vector<float>();
  ASSERT_EQ(g.size(), w.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i) bad += std::abs(g[i] - w[i]) > 1e-4f * (1.0f + std::abs(w[i]));
  EXPECT_EQ(bad, 0u) << what << ": elements differing from the CPU result";
}

// Regression: a copy between two GPUs waited only for the source's current stream on the host and
// ran as cudaMemcpyPeer, unordered with the destination's non-blocking current stream and with
// later work on the source. Here every stream is a pool (non-blocking) stream: the copy must
// follow the producers on the source's stream, precede the consumer on the destination's, and
// finish reading the source before the source's stream overwrites it.
TEST(CudaStream, CopyBetweenTwoGpusOnSideStreamsIsOrderedBothWays) {
  EMBER_REQUIRE_CUDA();
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "needs two CUDA devices; " << cuda_device_count() << " visible";
  const Tensor a = test_support::seeded({1 << 22}, 17, kFloat32);
  const Tensor want = add(mul(add(a, 1.0), 2.0), 3.0);
  for (const auto& [from, to_device] : {std::pair{Device::cuda(0), Device::cuda(1)},
                                         std::pair{Device::cuda(1), Device::cuda(0)}}) {
    for (bool non_blocking : {true, false}) {
      StreamGuard source_stream(new_stream(from)), destination_stream(new_stream(to_device));
      Tensor y = produce(a, from, 20);
      Tensor z = to(y, to_device, non_blocking);
      fill_(y, -1.0);  // on the source's stream: after the copy has read y
      Tensor w = add(z, 3.0);
      expect_values(to(w, Device::cpu()), want, non_blocking ? "non_blocking copy" : "blocking copy");
    }
  }
}

// The CUDA operations of the handshake (events with their device current, cross-stream waits,
// cudaMemcpyPeerAsync) between two non-blocking streams of one device, so that they run where a
// machine has a single GPU.
TEST(CudaStream, PeerCopyHandshakeOrdersTwoStreamsOfOneDevice) {
  EMBER_REQUIRE_CUDA();
  const Tensor a = test_support::seeded({1 << 22}, 18, kFloat32);
  const Stream source_stream = new_stream(kGpu), destination_stream = new_stream(kGpu);
  ASSERT_NE(source_stream, destination_stream);
  Tensor src, dst;
  {
    StreamGuard guard(source_stream);
    src = produce(a, kGpu, 20);
  }
  {
    StreamGuard guard(destination_stream);
    dst = empty({a.numel()}, TensorOptions(kFloat32).device(kGpu));
  }
  native::detail::copy_between_devices(cuda::cuda_peer_copy_ops(), dst.raw_data(), {0, destination_stream.id()},
                                       src.raw_data(), {0, source_stream.id()}, src.nbytes(), /*non_blocking=*/true);
  {
    StreamGuard guard(source_stream);
    fill_(src, -1.0);  // after the copy read src
  }
  StreamGuard guard(destination_stream);
  expect_values(to(add(dst, 3.0), Device::cpu()), add(mul(add(a, 1.0), 2.0), 3.0), "handshake copy");
}

}  // namespace
}  // namespace ember
