// A fake system side for pinned host memory (core/pinned_memory.h), so tests run the pinned
// path without CUDA: malloc'd blocks under a byte budget, counted allocations and frees, and
// events that complete only when a test says so. Process-wide state; single-threaded tests.
// ScopedFakePinnedAllocator also makes pinned_allocator() return an allocator over it, so
// Tensor::pin_memory() and the DataLoader's pin_memory=true use it.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/pinned_memory.h"

namespace ember::test_support {

struct FakePinnedBackend {
  static inline int64_t live_bytes = 0, budget = 1 << 30, allocs = 0, frees = 0;
  static inline std::vector<bool> events;  // events[i]: has event i+1 completed?
  static void reset(int64_t b = 1 << 30) {
    live_bytes = 0;
    budget = b;
    allocs = frees = 0;
    events.clear();
  }
  static void* alloc(size_t n) {
    if (live_bytes + static_cast<int64_t>(n) > budget) return nullptr;
    live_bytes += static_cast<int64_t>(n);
    ++allocs;
    void* p = std::malloc(n + sizeof(size_t));
    *static_cast<size_t*>(p) = n;
    return static_cast<size_t*>(p) + 1;
  }
  static void free(void* p) {
    size_t* base = static_cast<size_t*>(p) - 1;
    live_bytes -= static_cast<int64_t>(*base);
    ++frees;
    std::free(base);
  }
  static void* record_event(int, uint64_t) {
    events.push_back(false);
    return reinterpret_cast<void*>(events.size());  // 1-based handle
  }
  static bool event_done(void* e) { return events[reinterpret_cast<size_t>(e) - 1]; }
  static void destroy_event(void*) {}
  static detail::PinnedMemoryBackend backend() {
    return {.alloc = &alloc,
            .free = &free,
            .record_event = &record_event,
            .event_done = &event_done,
            .destroy_event = &destroy_event};
  }
};

/// A fresh fake backend and allocator, installed as pinned_allocator() for the scope.
/// Declare it before any tensor pinned through it (it must outlive them).
class ScopedFakePinnedAllocator {
 public:
  ScopedFakePinnedAllocator() : allocator_((FakePinnedBackend::reset(), FakePinnedBackend::backend())) {
    previous_ = detail::set_pinned_allocator_override(&allocator_);
  }
  ~ScopedFakePinnedAllocator() { detail::set_pinned_allocator_override(previous_); }
  ScopedFakePinnedAllocator(const ScopedFakePinnedAllocator&) = delete;
  ScopedFakePinnedAllocator& operator=(const ScopedFakePinnedAllocator&) = delete;
  PinnedAllocator& allocator() { return allocator_; }

 private:
  PinnedAllocator allocator_;
  PinnedAllocator* previous_ = nullptr;
};

}  // namespace ember::test_support
