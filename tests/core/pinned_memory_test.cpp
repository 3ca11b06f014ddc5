// The caching pinned-host allocator's logic (Note [Pinned host memory] in
// core/pinned_memory.cpp) over a fake backend with controllable events, so it runs without CUDA:
// blocks are cached by rounded size and reused, a block whose use was recorded on a stream is
// not reused until the event recorded at its free completes, empty_cache returns only ready
// blocks, a failing system allocation empties the cache and retries before OutOfMemoryError,
// and pinned_allocator() is a DeviceError where no CUDA device is visible.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/pinned_memory.h"
#include "tests/support/error_text.h"
#include "tests/support/fake_pinned_backend.h"

namespace ember {
namespace {

using Fake = test_support::FakePinnedBackend;

// A CUDA stream value for record_stream; the fake never touches a device.
const Stream kCopyStream(Device::cuda(0), 0x1234);

TEST(PinnedMemory, FreedBlockOfTheSameSizeClassIsReused) {
  Fake::reset();
  PinnedAllocator a(Fake::backend());
  void* first = nullptr;
  {
    DataPtr p = a.allocate(1000);  // rounded to 1024
    first = p.get();
    EXPECT_TRUE(p.device().is_cpu());
    EXPECT_TRUE(a.contains(first));
    EXPECT_TRUE(a.contains(static_cast<char*>(first) + 1023));
    EXPECT_EQ(a.stats().allocated_bytes, 1024);
  }
  EXPECT_FALSE(a.contains(first)) << "a freed block is not in use";
  EXPECT_EQ(a.stats().cached_blocks, 1);
  DataPtr again = a.allocate(600);  // also 1024
  EXPECT_EQ(again.get(), first);
  EXPECT_EQ(Fake::allocs, 1);
  DataPtr other = a.allocate(2000);  // 2048: a new block
  EXPECT_NE(other.get(), first);
  EXPECT_EQ(Fake::allocs, 2);
  EXPECT_EQ(a.allocate(0).get(), nullptr);
}

TEST(PinnedMemory, BlockUsedByACopyWaitsForItsEventBeforeReuse) {
  Fake::reset();
  PinnedAllocator a(Fake::backend());
  void* used = nullptr;
  {
    DataPtr p = a.allocate(4096);
    used = p.get();
    a.record_stream(static_cast<char*>(used) + 100, kCopyStream);  // a view into the block
    a.record_stream(used, kCopyStream);                             // the same stream once
    a.record_stream(used, Stream(Device::cpu()));                   // CPU streams: nothing to wait for
  }
  ASSERT_EQ(Fake::events.size(), 1u) << "one event per recorded CUDA stream, recorded at the free";
  EXPECT_EQ(a.stats().pending_blocks, 1);
  DataPtr while_copying = a.allocate(4096);
  EXPECT_NE(while_copying.get(), used) << "reused while the copy may still read it";
  a.empty_cache();
  EXPECT_EQ(Fake::frees, 0) << "empty_cache freed a block whose copy is pending";
  Fake::events[0] = true;  // the copy finished
  DataPtr after = a.allocate(4096);
  EXPECT_EQ(after.get(), used);
  EXPECT_EQ(a.stats().pending_blocks, 0);
}

TEST(PinnedMemory, EmptyCacheReturnsReadyBlocksOnly) {
  Fake::reset();
  PinnedAllocator a(Fake::backend());
  { DataPtr p = a.allocate(512); }
  DataPtr kept = a.allocate(8192);
  a.empty_cache();
  EXPECT_EQ(Fake::frees, 1);
  EXPECT_EQ(a.stats().reserved_bytes, 8192);
  EXPECT_EQ(a.stats().cached_blocks, 0);
}

TEST(PinnedMemory, FailedSystemAllocationEmptiesTheCacheThenRaisesOutOfMemory) {
  Fake::reset(/*budget=*/4096);
  PinnedAllocator a(Fake::backend());
  { DataPtr p = a.allocate(4096); }  // cached: the whole budget
  DataPtr q = a.allocate(2048);      // needs the cached 4096 block returned to the system first
  EXPECT_NE(q.get(), nullptr);
  EXPECT_EQ(Fake::frees, 1);
  const std::string msg = support::error_of<OutOfMemoryError>([&] { DataPtr r = a.allocate(4096); });
  EXPECT_NE(msg.find("pinned host memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4096"), std::string::npos) << msg;
}

// Regression: a request above 2^63 bytes doubled the block size until it wrapped to 0 and
// looped forever (found through pin_memory's extent of an empty view, computed negative).
TEST(PinnedMemory, ARequestNoBlockSizeCanHoldIsOutOfMemoryNotAHang) {
  Fake::reset();
  PinnedAllocator a(Fake::backend());
  for (size_t n : {std::numeric_limits<size_t>::max(), (size_t{1} << 63) + 1}) {
    SCOPED_TRACE(n);
    const std::string what = support::error_of<OutOfMemoryError>([&] { DataPtr p = a.allocate(n); });
    EXPECT_NE(what.find(std::to_string(n)), std::string::npos) << what;
  }
  EXPECT_EQ(Fake::allocs, 0) << "nothing reached the system";
}

TEST(PinnedMemory, ProcessAllocatorNeedsACudaDevice) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is visible: pinned_allocator() works here";
  const std::string what = support::error_of<DeviceError>([&] { pinned_allocator(); });
  EXPECT_NE(what.find("needs a CUDA device"), std::string::npos) << what;
}

}  // namespace
}  // namespace ember
