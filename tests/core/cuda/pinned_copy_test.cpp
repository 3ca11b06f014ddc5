// Copies between pinned host memory and a GPU (Note [Pinned host memory] in
// core/pinned_memory.cpp), on the real backend (cudaHostAlloc, events): a non-blocking upload
// from a pinned tensor and a non-blocking download (which lands in pinned memory) give back the
// data, with and without a dtype conversion, and a pageable source still copies correctly; the
// pinned block of an upload still queued on its stream is not handed out again until the copy has
// completed. ctest label gpu: skips without a device. (Under */cuda/: it includes cuda_runtime.h
// to hold a stream with a host function.)
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/pinned_memory.h"
#include "core/stream.h"
#include "tests/support/cuda.h"

namespace ember {
namespace {
using test_support::kGpu;

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

TEST(PinnedCopy, NonBlockingCopiesFromAndToPinnedMemoryGiveTheData) {
  EMBER_REQUIRE_CUDA();
  const Tensor x = native::reshape(arange(0.0, 4096.0, 1.0, kFloat32), {64, 64});
  const Tensor p = native::pin_memory(x);
  ASSERT_TRUE(p.is_pinned());
  const Tensor up = native::to(p, kGpu, /*non_blocking=*/true);
  const Tensor up64 = native::to(p, kGpu, kFloat64, /*non_blocking=*/true);  // upload, then cast on the GPU
  const Tensor down = native::to(up, Device::cpu(), /*non_blocking=*/true);
  EXPECT_TRUE(down.is_pinned()) << "a non-blocking download lands in pinned memory (as PyTorch)";
  current_stream(kGpu).synchronize();
  EXPECT_EQ(up.device(), kGpu);
  EXPECT_EQ(values(up), values(x));
  EXPECT_EQ(values(up64), values(x));
  EXPECT_EQ(values(down), values(x));
  // From pageable memory non_blocking falls back to a copy that waits for itself.
  const Tensor from_pageable = native::to(x, kGpu, /*non_blocking=*/true);
  EXPECT_EQ(values(from_pageable), values(x));
}

// Holds a stream with a host function until release() (or the end of the scope).
class StreamHold {
 public:
  explicit StreamHold(Stream s) : stream_(s) {
    EMBER_CUDA_CHECK(cudaLaunchHostFunc(cuda::to_cuda_stream(s.id()), &wait, &released_));
  }
  ~StreamHold() {
    release();
    stream_.synchronize();
  }
  void release() { released_.store(true); }

 private:
  static void wait(void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield();
  }
  Stream stream_;
  std::atomic<bool> released_{false};
};

TEST(PinnedCopy, BlockOfAQueuedUploadIsNotReusedBeforeTheCopyCompletes) {
  EMBER_REQUIRE_CUDA();
  const Stream side = new_stream(kGpu);
  StreamGuard on_side(side);
  const Tensor x = native::reshape(arange(0.0, 786432.0, 1.0, kFloat32), {768, 1024});  // 3 MiB: a 4 MiB block
  StreamHold hold(side);
  void* used = nullptr;
  Tensor up;
  {
    const Tensor p = native::pin_memory(x);
    used = p.raw_data();
    up = native::to(p, kGpu, /*non_blocking=*/true);  // queued behind the held host function
    EXPECT_FALSE(side.query()) << "the upload ran although its stream is held";
  }
  EXPECT_GE(pinned_allocator().stats().pending_blocks, 1);
  const Tensor during = native::pin_memory(x);
  EXPECT_NE(during.raw_data(), used) << "the block was handed out while the upload may still read it";
  hold.release();
  side.synchronize();
  const Tensor after = native::pin_memory(x);
  EXPECT_EQ(after.raw_data(), used) << "the block did not come back once the upload completed";
  EXPECT_EQ(values(up), values(x));
}

}  // namespace
}  // namespace ember
