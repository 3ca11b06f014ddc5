// Tensors in pinned host memory (Note [Pinned host memory] in core/pinned_memory.cpp), on CPU
// over the fake backend of tests/support/fake_pinned_backend.h installed as the process's pinned
// allocator: pin_memory() copies into a pinned block that the tensor's Storage knows and returns
// to the cache when freed; an already pinned tensor is returned as it is; a tensor not on the
// CPU is a ValueError and a missing CUDA device a DeviceError; the use a non-blocking copy
// records (detail::prepare_async_host_copy, Tensor::record_stream) keeps the block from reuse
// until the copy's event completes, while blocking copies and pageable memory record nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/pinned_memory.h"
#include "tests/support/fake_pinned_backend.h"

namespace ember {
namespace {
using Fake = test_support::FakePinnedBackend;
using test_support::ScopedFakePinnedAllocator;

// The stream a copy to cuda:0 would run on; the fake backend never touches a device.
const Stream kCopyStream(Device::cuda(0), 0x5678);

Tensor grid() { return native::reshape(ember::arange(0.0, 12.0, 1.0, kFloat32), {3, 4}); }

TEST(PinnedTensor, PinMemoryCopiesIntoAPinnedBlock) {
  ScopedFakePinnedAllocator fake;
  const Tensor x = native::transpose(grid(), 0, 1);  // non-contiguous source
  const Tensor p = native::pin_memory(x);
  EXPECT_TRUE(p.is_pinned());
  EXPECT_TRUE(p.storage().is_pinned());
  EXPECT_FALSE(x.is_pinned()) << "the source stays where it was";
  EXPECT_FALSE(p.storage().is_same(x.storage()));
  EXPECT_TRUE(p.device().is_cpu());
  EXPECT_TRUE(p.is_contiguous());
  EXPECT_EQ(p.sizes(), x.sizes());
  EXPECT_EQ(p.dtype(), kFloat32);
  EXPECT_EQ(p.to_vector<float>(), x.to_vector<float>());
  EXPECT_TRUE(fake.allocator().contains(p.raw_data()));
  EXPECT_EQ(Fake::allocs, 1);
  EXPECT_TRUE(native::narrow(p, 0, 1, 2).is_pinned()) << "a view shares the pinned storage";
}

TEST(PinnedTensor, AlreadyPinnedTensorIsReturnedAsItIs) {
  ScopedFakePinnedAllocator fake;
  const Tensor p = native::pin_memory(grid());
  EXPECT_TRUE(native::pin_memory(p).is_same(p));
  EXPECT_EQ(Fake::allocs, 1);
}

TEST(PinnedTensor, OrdinaryMemoryIsNotPinned) {
  ScopedFakePinnedAllocator fake;
  EXPECT_FALSE(grid().is_pinned());
  EXPECT_FALSE(ember::empty({0}).is_pinned());
  const Tensor empty_pinned = native::pin_memory(ember::empty({0, 3}));
  EXPECT_TRUE(empty_pinned.is_pinned()) << "an empty tensor is pinned too";
  EXPECT_EQ(empty_pinned.sizes(), (IntList{0, 3}));
}

TEST(PinnedTensor, FreeingAPinnedTensorReturnsItsBlockToTheCache) {
  ScopedFakePinnedAllocator fake;
  void* first = nullptr;
  {
    const Tensor p = native::pin_memory(grid());  // 48 bytes: a 512-byte block
    first = p.raw_data();
    EXPECT_EQ(fake.allocator().stats().allocated_bytes, 512);
  }
  EXPECT_EQ(fake.allocator().stats().allocated_bytes, 0);
  EXPECT_EQ(fake.allocator().stats().cached_blocks, 1);
  EXPECT_EQ(Fake::frees, 0) << "the block went back to the cache, not to the system";
  const Tensor again = native::pin_memory(ember::ones({5}, kFloat64));
  EXPECT_EQ(again.raw_data(), first);
  EXPECT_EQ(Fake::allocs, 1);
}

TEST(PinnedTensor, NonBlockingCopyHoldsTheBlockUntilItsEventCompletes) {
  ScopedFakePinnedAllocator fake;
  void* used = nullptr;
  {
    const Tensor p = native::pin_memory(grid());
    used = p.raw_data();
    EXPECT_TRUE(detail::prepare_async_host_copy(native::narrow(p, 0, 1, 1).storage(), kCopyStream, true))
        << "a non-blocking copy from pinned memory may run asynchronously";
  }
  ASSERT_EQ(Fake::events.size(), 1u) << "one event on the copy's stream, recorded at the free";
  EXPECT_EQ(fake.allocator().stats().pending_blocks, 1);
  const Tensor during = native::pin_memory(grid());
  EXPECT_NE(during.raw_data(), used) << "the block was reused while the copy may still read it";
  Fake::events[0] = true;  // the copy has finished
  const Tensor after = native::pin_memory(grid());
  EXPECT_EQ(after.raw_data(), used) << "the block did not become reusable after its event completed";
  EXPECT_EQ(fake.allocator().stats().pending_blocks, 0);
}

TEST(PinnedTensor, BlockingCopiesAndPageableMemoryRecordNothing) {
  ScopedFakePinnedAllocator fake;
  {
    const Tensor p = native::pin_memory(grid());
    EXPECT_FALSE(detail::prepare_async_host_copy(p.storage(), kCopyStream, /*non_blocking=*/false));
    EXPECT_FALSE(detail::prepare_async_host_copy(grid().storage(), kCopyStream, /*non_blocking=*/true))
        << "pageable memory: the copy must wait for itself";
  }
  EXPECT_TRUE(Fake::events.empty());
  EXPECT_EQ(fake.allocator().stats().pending_blocks, 0);
  EXPECT_EQ(fake.allocator().stats().cached_blocks, 1);
}

TEST(PinnedTensor, RecordStreamOnAPinnedTensorDefersReuse) {
  ScopedFakePinnedAllocator fake;
  {
    const Tensor p = native::pin_memory(grid());
    native::select(p, 0, 2).record_stream(kCopyStream);
    p.record_stream(Stream(Device::cpu()));  // CPU work is synchronous: nothing to wait for
  }
  ASSERT_EQ(Fake::events.size(), 1u);
  EXPECT_EQ(fake.allocator().stats().pending_blocks, 1);
  Fake::events[0] = true;
  fake.allocator().empty_cache();
  EXPECT_EQ(fake.allocator().stats().reserved_bytes, 0) << "the completed block was not released";
  grid().record_stream(kCopyStream);  // pageable memory: a no-op
}

TEST(PinnedTensor, PinningANonCpuTensorIsAValueError) {
  ScopedFakePinnedAllocator fake;
  // A CUDA tensor's handle over memory nobody touches: the check comes before any copy.
  static float cell[4];
  const Tensor on_gpu = make_tensor(Storage::from_external(cell, sizeof(cell), Device::cuda(0), nullptr), {4}, {1},
                                    0, kFloat32);
  try {
    native::pin_memory(on_gpu);
    FAIL() << "pin_memory of a cuda:0 tensor did not throw";
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("pin_memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
  }
  EXPECT_EQ(Fake::allocs, 0);
}

TEST(PinnedTensor, WithoutACudaDeviceIsADeviceErrorNamingIt) {
  if (pinned_memory_available()) GTEST_SKIP() << "a CUDA device is visible: pin_memory works here";
  try {
    native::pin_memory(grid());
    FAIL() << "pin_memory without a CUDA device did not throw";
  } catch (const DeviceError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("pin_memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("needs a CUDA device"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace ember
