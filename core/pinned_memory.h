// Page-locked ("pinned") host memory from a caching allocator (Note [Pinned host memory] in
// core/pinned_memory.cpp): the memory asynchronous host<->device copies need. The system calls
// (cudaHostAlloc / cudaFreeHost, events) come from a backend that core/cuda registers; tests
// give an allocator a fake one. Every function here is thread-safe (one mutex per allocator).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "core/allocator.h"
#include "core/storage.h"
#include "core/stream.h"

namespace ember {

namespace detail {
/// The system side of pinned memory. alloc returns nullptr when out of memory (and throws
/// Error for any other failure); the event functions are those of Note [Stream-aware frees].
struct PinnedMemoryBackend {
  void* (*alloc)(size_t num_bytes) = nullptr;
  void (*free)(void* ptr) = nullptr;
  void* (*record_event)(int device_index, uint64_t stream) = nullptr;
  bool (*event_done)(void* event) = nullptr;
  void (*destroy_event)(void* event) = nullptr;
};
/// Installs the backend of pinned_allocator() (core/cuda does, at register_cuda_backend()).
void register_pinned_memory_backend(PinnedMemoryBackend backend);
}  // namespace detail

class PinnedAllocator {
 public:
  explicit PinnedAllocator(detail::PinnedMemoryBackend backend);
  /// Returns cached blocks to the system; blocks still in use are left to their owners.
  ~PinnedAllocator();
  PinnedAllocator(const PinnedAllocator&) = delete;
  PinnedAllocator& operator=(const PinnedAllocator&) = delete;

  /// At least num_bytes of pinned memory (a CPU DataPtr), from a cached block of the rounded
  /// size (a power of two, >= 512 bytes) whose recorded uses have completed, else from the
  /// system; on failure the cache is emptied and the system asked once more, then
  /// OutOfMemoryError. 0 bytes: a null DataPtr.
  DataPtr allocate(size_t num_bytes);
  /// Marks the block holding `ptr` as used by work queued on `stream` (a CUDA stream; a no-op
  /// for CPU streams and memory of another allocator): once freed, the block is reused only
  /// after an event recorded on that stream at the free has completed.
  void record_stream(const void* ptr, Stream stream);
  /// True when `ptr` lies inside a block of this allocator that is in use.
  bool contains(const void* ptr) const;
  /// The allocator whose block `data` is (any PinnedAllocator, a test's too), else nullptr:
  /// how a Storage knows it is pinned (Storage::is_pinned) and where its uses are recorded.
  static PinnedAllocator* owner_of(const DataPtr& data);
  /// Returns free blocks whose uses have completed to the system.
  void empty_cache();

  struct Stats {
    int64_t allocated_bytes = 0;  // in blocks handed out
    int64_t reserved_bytes = 0;   // in all blocks (handed out, cached, pending)
    int64_t cached_blocks = 0;    // free and reusable
    int64_t pending_blocks = 0;   // freed, waiting for their events
    int64_t system_allocs = 0;    // backend.alloc calls that succeeded
  };
  Stats stats() const;

 private:
  struct Block {
    size_t size = 0;
    bool in_use = false;
    std::vector<Stream> streams;  // uses recorded while in use
    std::vector<void*> events;    // recorded at free, one per stream
  };
  static void delete_block(void* ctx, void* ptr);
  void release(void* ptr);
  void process_events_locked();
  std::vector<void*> take_free_locked();

  detail::PinnedMemoryBackend backend_;
  mutable std::mutex mu_;
  std::map<uintptr_t, Block> blocks_;              // every block by address; guarded by mu_
  std::multimap<size_t, void*> free_;              // reusable blocks by size; guarded by mu_
  std::vector<void*> pending_;                     // freed blocks with events; guarded by mu_
  int64_t system_allocs_ = 0;                      // guarded by mu_
};

/// The process's pinned allocator (over core/cuda's backend), or the one a test installed with
/// detail::set_pinned_allocator_override. Throws DeviceError when ember was built without CUDA
/// or no CUDA device is visible: pinned memory needs the CUDA driver.
PinnedAllocator& pinned_allocator();
/// Whether pinned_allocator() works here (a CUDA device is visible, or an override is set).
bool pinned_memory_available();

namespace detail {
/// Makes pinned_allocator() return `allocator` (nullptr: the process's own again) and returns
/// the previous override. Lets tests run the whole pinned path (Tensor::pin_memory, the
/// DataLoader's pin_memory) over a fake backend on machines without CUDA. The allocator must
/// outlive every tensor pinned through it.
PinnedAllocator* set_pinned_allocator_override(PinnedAllocator* allocator);

/// Decides how a host<->device copy that reads or writes `host` runs (Note [Pinned host
/// memory]): when non_blocking was asked and `host` is pinned, records `stream` (the CUDA
/// stream the copy is queued on) on its block, so the block is not reused before the copy has
/// finished, and returns true: the copy may return before it completes. Otherwise false: the
/// copy waits for itself, as PyTorch's non_blocking copies from pageable memory do.
bool prepare_async_host_copy(const Storage& host, Stream stream, bool non_blocking);
}  // namespace detail

}  // namespace ember
