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
#include "tests/support/error_text.h"
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
  EXPECT_EQ(p.sizes(), x.sizes());
  EXPECT_EQ(p.strides(), x.strides()) << "the copy keeps the layout (PinMemoryKeepsSizesAndStrides)";
  EXPECT_EQ(p.dtype(), kFloat32);
  EXPECT_EQ(p.to_vector<float>(), x.to_vector<float>());
  EXPECT_TRUE(fake.allocator().contains(p.raw_data()));
  EXPECT_EQ(Fake::allocs, 1);
  EXPECT_TRUE(native::narrow(p, 0, 1, 2).is_pinned()) << "a view shares the pinned storage";
}

// Regression: pin_memory returned a contiguous copy; PyTorch's keeps the input's sizes and
// strides, its storage holding the input's whole strided extent from offset 0.
TEST(PinnedTensor, PinMemoryKeepsSizesAndStrides) {
  ScopedFakePinnedAllocator fake;
  struct Case {
    const char* what;
    Tensor x;
    int64_t extent;  // elements of the pinned storage
  };
  const Tensor wide = native::reshape(ember::arange(0.0, 30.0, 1.0, kFloat64), {5, 6});
  const std::vector<Case> cases = {
      {"transposed", native::transpose(grid(), 0, 1), 12},
      {"a narrowed view with an offset and gaps", native::narrow(native::narrow(wide, 0, 1, 3), 1, 2, 3),
       (3 - 1) * 6 + (3 - 1) + 1},
      {"every other column", native::select(native::reshape(wide, {5, 3, 2}), 2, 1), 4 * 6 + 2 * 2 + 1},
      {"expanded (stride 0)", native::expand(native::narrow(grid(), 0, 1, 1), {5, 4}), 4},
      {"a scalar", native::select(native::select(grid(), 0, 2), 0, 3), 1},
      {"contiguous", grid(), 12},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Tensor p = native::pin_memory(c.x);
    EXPECT_TRUE(p.is_pinned());
    EXPECT_EQ(p.sizes(), c.x.sizes());
    EXPECT_EQ(p.strides(), c.x.strides());
    EXPECT_EQ(p.is_contiguous(), c.x.is_contiguous());
    EXPECT_EQ(p.storage_offset(), 0);
    EXPECT_EQ(p.storage().num_bytes(), static_cast<size_t>(c.extent) * element_size(c.x.dtype()));
    EXPECT_EQ(native::to(p, kFloat64).to_vector<double>(), native::to(c.x, kFloat64).to_vector<double>());
    EXPECT_FALSE(p.storage().is_same(c.x.storage()));
  }
  // Empty: sizes and strides kept, no bytes, pinned all the same.
  const Tensor empty_view = native::narrow(native::transpose(grid(), 0, 1), 0, 0, 0);
  const Tensor p = native::pin_memory(empty_view);
  EXPECT_TRUE(p.is_pinned());
  EXPECT_EQ(p.sizes(), empty_view.sizes());
  EXPECT_EQ(p.strides(), empty_view.strides());
  EXPECT_EQ(p.storage().num_bytes(), 0u);
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
  const std::string msg = support::error_of<ValueError>([&] { native::pin_memory(on_gpu); });
  EXPECT_NE(msg.find("pin_memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
  EXPECT_EQ(Fake::allocs, 0);
}

TEST(PinnedTensor, WithoutACudaDeviceIsADeviceErrorNamingIt) {
  if (pinned_memory_available()) GTEST_SKIP() << "a CUDA device is visible: pin_memory works here";
  const std::string msg = support::error_of<DeviceError>([&] { native::pin_memory(grid()); });
  EXPECT_NE(msg.find("pin_memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("needs a CUDA device"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ember
