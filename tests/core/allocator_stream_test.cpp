// The caching allocator's stream-aware frees (Note [Stream-aware frees]), its system calls made
// with the mutex released, and its errors for allocation failures that are not out-of-memory,
// all on a CPU device whose raw-memory backend is a fake with controllable events (the CUDA
// backend provides the same hooks through core/cuda/cuda_memory.cpp); and the cuDNN RNN's use of
// them, the buffers a forward keeps for its backward (Note [cuDNN RNN streams]).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "core/allocator.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"
#include "tests/support/error_text.h"

namespace ember {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// The fake backend's state (one test at a time uses it).
std::atomic<bool> g_event_done{false};
std::atomic<int> g_events_live{0};
std::atomic<bool> g_fail_not_oom{false};
std::mutex g_gate_mutex;
std::condition_variable g_gate_cv;
bool g_gate_armed = false;   // guarded by g_gate_mutex: alloc waits until released
bool g_gate_released = false;
bool g_gate_timed_out = false;

void* fake_alloc(size_t n, int) {
  if (g_fail_not_oom) return nullptr;
  {
    std::unique_lock<std::mutex> lock(g_gate_mutex);
    if (g_gate_armed) {
      g_gate_timed_out = !g_gate_cv.wait_for(lock, std::chrono::seconds(5), [] { return g_gate_released; });
      g_gate_armed = false;
    }
  }
  return std::aligned_alloc(64, n);
}
void fake_free(void* p, int) { std::free(p); }
size_t fake_capacity(int) { return 0; }
const char* fake_alloc_error(int) { return g_fail_not_oom ? "the fake driver is shutting down" : nullptr; }
bool fake_mem_info(int, size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = 3 * kMiB;
  *total_bytes = 80 * kMiB;
  return true;
}
void* fake_record_event(int, uint64_t) {
  ++g_events_live;
  return &g_event_done;
}
bool fake_event_done(void*) { return g_event_done.load(); }
void fake_destroy_event(void*) { --g_events_live; }

// Installs the fake backend for allocators created while alive (a fresh CPU device index).
class FakeBackend {
 public:
  FakeBackend() : original_(detail::raw_memory_backend(DeviceType::CPU)) {
    detail::RawMemoryBackend b{&fake_alloc, &fake_free, &fake_capacity};
    b.alloc_error = &fake_alloc_error;
    b.mem_info = &fake_mem_info;
    b.record_event = &fake_record_event;
    b.event_done = &fake_event_done;
    b.destroy_event = &fake_destroy_event;
    detail::register_raw_memory_backend(DeviceType::CPU, b);
  }
  ~FakeBackend() { detail::register_raw_memory_backend(DeviceType::CPU, original_); }

 private:
  detail::RawMemoryBackend original_;
};

TEST(AllocatorStreams, WithoutEventsAFreeIsImmediateEvenAfterRecordStream) {
  const Device d = Device::cpu(56);  // the default CPU backend: streams run synchronously
  void* first = nullptr;
  {
    DataPtr a = get_allocator(d)->allocate(kMiB);
    first = a.get();
    record_stream(a, Stream(d, 7));
  }
  EXPECT_EQ(detail::pending_frees(d), 0);
  DataPtr b = get_allocator(d)->allocate(kMiB);
  EXPECT_EQ(b.get(), first) << "the cached block is reused at once";
}

TEST(AllocatorStreams, ABlockUsedOnAnotherStreamWaitsForThatStreamsEvent) {
  FakeBackend fake;
  const Device d = Device::cpu(57);
  g_event_done = false;
  void* first = nullptr;
  {
    DataPtr a = get_allocator(d)->allocate(kMiB);
    first = a.get();
    record_stream(a, Stream(d, 7));
    record_stream(a, Stream(d, 7));  // once per stream
    record_stream(a, Stream(d, 0));  // its own stream: nothing to wait for
  }
  EXPECT_EQ(g_events_live.load(), 1) << "one event, on stream 7";
  EXPECT_EQ(detail::pending_frees(d), 1);
  {
    DataPtr b = get_allocator(d)->allocate(kMiB);
    EXPECT_NE(b.get(), first) << "reused while stream 7 may still use it";
  }
  empty_cache(d);
  EXPECT_EQ(detail::pending_frees(d), 1) << "empty_cache does not release a pending block";
  g_event_done = true;
  EXPECT_EQ(detail::pending_frees(d), 0);
  EXPECT_EQ(g_events_live.load(), 0) << "the event is destroyed";
  DataPtr c = get_allocator(d)->allocate(kMiB);
  EXPECT_EQ(c.get(), first) << "reused once the event completed";
  g_event_done = false;
}

TEST(AllocatorStreams, AFailureThatIsNotOutOfMemoryIsReportedAsWhatItIs) {
  FakeBackend fake;
  const Device d = Device::cpu(58);
  g_fail_not_oom = true;
  try {
    DataPtr a = get_allocator(d)->allocate(kMiB);
    FAIL() << "expected Error";
  } catch (const OutOfMemoryError& e) {
    FAIL() << "reported as out of memory: " << e.what();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("not for lack of memory"), std::string::npos) << what;
    EXPECT_NE(what.find("the fake driver is shutting down"), std::string::npos) << what;
  }
  g_fail_not_oom = false;
  EXPECT_EQ(memory_stats(d).num_ooms, 0);
  DataPtr ok = get_allocator(d)->allocate(kMiB);  // usable afterwards
  EXPECT_NE(ok.get(), nullptr);
}

TEST(AllocatorStreams, OutOfMemoryStatesTheDevicesFreeAndTotalMemory) {
  FakeBackend fake;
  const Device d = Device::cpu(59);
  const std::string what = support::error_of<OutOfMemoryError>([&] {
    DataPtr a = get_allocator(d)->allocate(size_t{1} << 61);  // beyond any device
  });
  EXPECT_NE(what.find("total capacity of 80.00 MiB of which 3.00 MiB is free"), std::string::npos) << what;
}

TEST(AllocatorStreams, SystemAllocationRunsWithTheMutexReleased) {
  FakeBackend fake;
  const Device d = Device::cpu(60);
  Allocator* alloc = get_allocator(d);
  { DataPtr warm = alloc->allocate(kMiB); }  // a cached small segment for the second thread
  {
    std::lock_guard<std::mutex> lock(g_gate_mutex);
    g_gate_armed = true;
    g_gate_released = false;
    g_gate_timed_out = false;
  }
  std::atomic<bool> other_done{false};
  std::thread big([&] {
    DataPtr b = alloc->allocate(64 * kMiB);  // a new segment: blocks in fake_alloc until released
    EXPECT_NE(b.get(), nullptr);
  });
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let `big` reach fake_alloc
    DataPtr c = alloc->allocate(kMiB);  // from the cache: must not wait for the mutex
    other_done = true;
    std::lock_guard<std::mutex> lock(g_gate_mutex);
    g_gate_released = true;
    g_gate_cv.notify_all();
  });
  other.join();
  big.join();
  EXPECT_TRUE(other_done.load());
  // With the mutex held across the system call, `other` would wait for `big`, which waits for
  // `other` to open the gate: fake_alloc gives up after 5 s instead of hanging.
  std::lock_guard<std::mutex> lock(g_gate_mutex);
  EXPECT_FALSE(g_gate_timed_out) << "the allocator held its mutex during the system call";
}

// Regression: a cuDNN backward on another stream than its forward did not mark the forward's
// reserve space (nor the weight-space copy and device lengths) as used there, so the forward's
// stream could reuse them while the backward's kernels were still queued.
TEST(AllocatorStreams, CudnnRnnSavedBuffersWaitForTheBackwardsStream) {
  FakeBackend fake;
  const Device d = Device::cpu(61);
  g_event_done = false;
  const TensorOptions opts = TensorOptions(kFloat32).device(d);
  void* reserve = nullptr;
  {
    native::CudnnRnnSaved s;
    s.weight_space = native::narrow(empty({1024}, opts), 0, 0, 256);  // a view at the flat buffer's start
    s.reserve = empty({static_cast<int64_t>(kMiB / 4)}, opts);
    s.dev_seq_lengths = empty({3}, TensorOptions(kInt32).device(d));
    reserve = s.reserve.raw_data();
    native::cudnn_rnn_record_stream(s, Stream(d, 0));  // the forward's own stream: nothing to wait for
    EXPECT_EQ(g_events_live.load(), 0);
    native::cudnn_rnn_record_stream(s, Stream(d, 9));
  }
  EXPECT_EQ(detail::pending_frees(d), 3) << "weight space, reserve space and lengths wait for stream 9";
  {
    Tensor again = empty({static_cast<int64_t>(kMiB / 4)}, opts);
    EXPECT_NE(again.raw_data(), reserve) << "the reserve space was reused while stream 9 may still read it";
  }
  g_event_done = true;
  EXPECT_EQ(detail::pending_frees(d), 0) << "released once stream 9 is past them";
  EXPECT_EQ(g_events_live.load(), 0);
  g_event_done = false;
}

}  // namespace
}  // namespace ember
