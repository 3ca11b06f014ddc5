#include "core/allocator.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "core/cuda/cuda_backend.h"
#include "core/detail/cpu_memory.h"
#include "core/detail/memory_limit.h"
#include "core/error.h"

// See Note [Poisoning in sanitizer builds]. GCC defines __SANITIZE_ADDRESS__, clang answers
// __has_feature(address_sanitizer) (the fuzz targets are built with clang).
#if defined(__SANITIZE_ADDRESS__)
#define EMBER_ALLOCATOR_POISONS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMBER_ALLOCATOR_POISONS 1
#endif
#endif
#if defined(EMBER_ALLOCATOR_POISONS)
#include <sanitizer/asan_interface.h>
#endif

// Note [Caching allocator]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// One DeviceCachingAllocator per device (cpu:0 .. cpu:63, cuda:0 ..), created lazily by
// get_allocator() and never destroyed (tensors freed during static destruction still find
// their allocator). Each instance owns a mutex that guards all of its state; devices never
// share locks. The algorithm is PyTorch's CUDA caching allocator, written once for every
// device type; the only device-specific part is the RawMemoryBackend (aligned_alloc/free on
// CPU; cudaMalloc/cudaFree, registered by core/cuda) that provides *segments*.
//
//  * Size classes. A request of n bytes is rounded up to a multiple of 512 (kMinBlockSize).
//    Requests <= 1 MiB (kSmallSize) are served from the small pool, whose segments are 2 MiB
//    (kSmallBuffer); larger requests from the large pool, whose segments are 20 MiB
//    (kLargeBuffer) for requests below 10 MiB (kMinLargeAlloc) and the request rounded up to
//    a multiple of 2 MiB (kRoundLarge) above. If the preferred segment size cannot be
//    obtained (limit or system), a segment of exactly the rounded request is tried before
//    giving up, so a memory limit is honoured to the 512-byte granularity.
//  * Blocks. A segment is a doubly linked list (prev/next) of Blocks covering it without
//    gaps. Free blocks sit in their pool's std::set ordered by (stream, size, address);
//    allocation is a best-fit lower_bound in that set. Blocks only ever serve the stream
//    they were created for (stream id 0 until CUDA streams land), which is what makes reuse
//    stream-aware: memory freed on one stream is never handed to another without a sync.
//  * Splitting. When the best fit is larger than needed the tail is split off into a new
//    free block if the remainder is >= 512 B (small pool) or > 1 MiB (large pool);
//    otherwise the whole block is handed out (active_bytes counts it, allocated_bytes
//    counts the rounded request).
//  * Merging. On free, a block is coalesced with its free prev/next neighbours of the same
//    segment, so freeing the halves of a split block restores the larger block.
//  * Out of memory. When a segment would exceed the device's limit (set_memory_limit or
//    EMBER_MEMORY_LIMIT) or the backend returns nullptr, every fully free cached segment is
//    released (as empty_cache()), num_alloc_retries is incremented and the system
//    allocation is retried once; if that fails too num_ooms is incremented and
//    OutOfMemoryError is thrown with PyTorch's wording. Nothing else changes on that path,
//    so the allocator is fully usable after the throw.
//  * Zero bytes. allocate(0) returns a DataPtr whose get() is nullptr, with no deleter and
//    the right device; it touches no statistics (as PyTorch's CUDA allocator).
//  * Fast path. Block objects come from a per-allocator free list and the pools' set nodes
//    from a fixed-size free list (NodeArena), so a cached alloc+free does no heap allocation:
//    one uncontended lock, a lower_bound, a few set node moves.
//  * DataPtr. The context pointer is the Block; the deleter locks block->owner and returns
//    the block to its pool.
//  * System calls outside the lock. backend alloc/free (cudaMalloc/cudaFree, which may
//    synchronize the device) run with the mutex released: a thread that needs a new segment
//    counts its size as in flight (so two threads cannot both pass the limit), unlocks,
//    allocates, relocks and carves its block; release_cached_segments() takes fully free
//    segments out of the pools under the lock and hands them back after unlocking.
//  * fork(). pthread_atfork handlers take the creation mutex and every allocator's mutex
//    before fork and release them in both parent and child (as glibc's malloc does), so a
//    child forked while another thread was inside the allocator (DataLoader workers) does
//    not inherit a locked mutex. The child keeps the parent's cache and statistics.
//
// Note [Poisoning in sanitizer builds]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// ASan only knows the segments (one aligned_alloc each), so without help it sees no
// overflow from one block into its neighbour, into the rounding slack, or into a freed block:
// all of that is memory the program "owns". Under ASan (EMBER_ALLOCATOR_POISONS), for host
// memory only (CUDA segments are not host addresses), the allocator keeps this invariant:
// every byte of a segment that is not currently handed out is poisoned.
//  * A new segment is poisoned whole when it is reserved.
//  * allocate(n) unpoisons exactly [ptr, ptr + n): the rounding to 512 bytes, and the tail
//    of a block too small to split, stay poisoned.
//  * free() poisons the whole block before merging it. A split cuts a free (hence already
//    poisoned) block, so the tail it leaves in the pool needs no work; the cost of poisoning
//    stays proportional to the bytes handed out, not to the segment.
//  * A segment is unpoisoned before it goes back to the backend.
// An access outside a live allocation is then reported as "use-after-poison". Release builds
// compile none of this.

// Note [Stream-aware frees]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// A block belongs to the stream it was allocated on (the current stream, core/stream.h) and is
// only reused by that stream, so work queued there before the free orders itself before any
// reuse. Memory also used on other streams is marked with record_stream(); when such a block is
// freed the allocator records an event on each of those streams (backend record_event) and
// keeps the block out of the pools until every event has completed. Pending blocks are
// checked (event_done, which never blocks) at each allocate and at empty_cache; their bytes
// stay allocated in the statistics until then. CPU devices run every stream synchronously and
// have no events, so a free there is immediate.

namespace ember {
namespace {

constexpr size_t kMinBlockSize = 512;               // all sizes are multiples of this
constexpr size_t kSmallSize = 1 << 20;              // largest request served by the small pool
constexpr size_t kSmallBuffer = 2 << 20;            // small pool segment size
constexpr size_t kLargeBuffer = 20 << 20;           // large pool segment for requests < kMinLargeAlloc
constexpr size_t kMinLargeAlloc = 10 << 20;         // above this, segments are the rounded request
constexpr size_t kRoundLarge = 2 << 20;             // rounding of large segments
constexpr size_t kMaxRequest = size_t{1} << 60;     // beyond this rounding could overflow

constexpr int kNumSlots = 2 * kMaxDevicesPerType;

std::string device_name(Device d) {
  return std::string(d.is_cuda() ? "cuda" : "cpu") + ":" + std::to_string(d.index);
}

std::string format_size(uint64_t n) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2);
  if (n < 1024) {
    os.unsetf(std::ios::floatfield);
    os << n << " bytes";
  } else if (n < (uint64_t{1} << 20)) {
    os << static_cast<double>(n) / 1024.0 << " KiB";
  } else if (n < (uint64_t{1} << 30)) {
    os << static_cast<double>(n) / (1024.0 * 1024.0) << " MiB";
  } else {
    os << static_cast<double>(n) / (1024.0 * 1024.0 * 1024.0) << " GiB";
  }
  return os.str();
}

size_t round_size(size_t n) {
  if (n < kMinBlockSize) return kMinBlockSize;
  return kMinBlockSize * ((n + kMinBlockSize - 1) / kMinBlockSize);
}

size_t segment_size(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((rounded + kRoundLarge - 1) / kRoundLarge);
}

// See Note [Poisoning in sanitizer builds]. `host` is false for device memory.
void poison(bool host, const char* ptr, size_t num_bytes) {
#if defined(EMBER_ALLOCATOR_POISONS)
  if (host) ASAN_POISON_MEMORY_REGION(ptr, num_bytes);
#endif
}
void unpoison(bool host, const char* ptr, size_t num_bytes) {
#if defined(EMBER_ALLOCATOR_POISONS)
  if (host) ASAN_UNPOISON_MEMORY_REGION(ptr, num_bytes);
#endif
}

// ---- raw memory backends ----------------------------------------------------------------
struct BackendSlot {
  bool registered = false;
  detail::RawMemoryBackend backend{};
};
std::mutex g_backend_mutex;  // guards g_backends
std::array<BackendSlot, 2> g_backends = {
    BackendSlot{true, detail::RawMemoryBackend{&detail::cpu_alloc, &detail::cpu_free, &detail::cpu_capacity}},
    BackendSlot{false, detail::RawMemoryBackend{nullptr, nullptr, nullptr}}};

// ---- blocks and pools ------------------------------------------------------------------
class DeviceCachingAllocator;
struct BlockPool;

struct Block {
  DeviceCachingAllocator* owner = nullptr;
  BlockPool* pool = nullptr;
  char* ptr = nullptr;
  size_t size = 0;         // bytes this block covers
  size_t requested = 0;    // rounded request while allocated (counted in allocated_bytes)
  uint64_t stream = 0;     // the stream the segment was allocated for
  std::vector<uint64_t> stream_uses;  // other streams that used it (record_stream)
  bool allocated = false;
  Block* prev = nullptr;   // neighbours within the segment
  Block* next = nullptr;
  Block* free_next = nullptr;  // Block free list link
};

struct BlockComparator {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
  }
};

// Fixed-size free list for the pools' std::set nodes, which all have one size; cheaper than
// malloc and std::pmr pools on the fast path. Guarded by the owning allocator's mutex.
class NodeArena {
 public:
  void* allocate(size_t num_bytes) {
    if (num_bytes > sizeof(Slot)) return ::operator new(num_bytes);
    if (head_ == nullptr) refill();
    Slot* slot = head_;
    head_ = slot->next;
    return slot;
  }
  void deallocate(void* ptr, size_t num_bytes) noexcept {
    if (num_bytes > sizeof(Slot)) {
      ::operator delete(ptr);
      return;
    }
    auto* slot = static_cast<Slot*>(ptr);
    slot->next = head_;
    head_ = slot;
  }

 private:
  union Slot {
    Slot* next;
    alignas(std::max_align_t) char bytes[64];  // a red-black tree node of a pointer is 40 bytes
  };
  static constexpr size_t kSlotsPerChunk = 256;
  void refill() {
    chunks_.push_back(std::make_unique<Slot[]>(kSlotsPerChunk));
    Slot* chunk = chunks_.back().get();
    for (size_t i = 0; i < kSlotsPerChunk; ++i) {
      chunk[i].next = head_;
      head_ = &chunk[i];
    }
  }
  Slot* head_ = nullptr;
  std::vector<std::unique_ptr<Slot[]>> chunks_;
};

template <typename T>
struct ArenaAllocator {
  using value_type = T;
  NodeArena* arena;
  explicit ArenaAllocator(NodeArena* a) noexcept : arena(a) {}
  template <typename U>
  ArenaAllocator(const ArenaAllocator<U>& o) noexcept : arena(o.arena) {}  // NOLINT: rebinding
  T* allocate(size_t n) { return static_cast<T*>(arena->allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { arena->deallocate(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const ArenaAllocator<U>& o) const noexcept { return arena == o.arena; }
};

struct BlockPool {
  BlockPool(bool small, NodeArena* arena) : blocks(ArenaAllocator<Block*>(arena)), is_small(small) {}
  std::set<Block*, BlockComparator, ArenaAllocator<Block*>> blocks;  // free blocks
  const bool is_small;
};

struct Stat {
  int64_t current = 0, peak = 0, total_allocated = 0, total_freed = 0;
  void increase(int64_t n) {
    current += n;
    total_allocated += n;
    if (current > peak) peak = current;
  }
  void decrease(int64_t n) {
    current -= n;
    total_freed += n;
  }
  void reset_peak() { peak = current; }
};

struct FullStats {
  Stat allocated_bytes, reserved_bytes, active_bytes;
  Stat allocations;  // live allocations (count)
  Stat segments;     // live segments (count)
  int64_t num_alloc_retries = 0;
  int64_t num_ooms = 0;
};

void delete_block(void* ctx, void* ptr);

class DeviceCachingAllocator final : public Allocator {
 public:
  DeviceCachingAllocator(Device device, detail::RawMemoryBackend backend, int64_t limit)
      : device_(device),
        backend_(backend),
        limit_(limit),
        small_pool_(true, &node_arena_),
        large_pool_(false, &node_arena_) {}

  DataPtr allocate(size_t num_bytes) override {
    return allocate_on_stream(num_bytes, device_.is_cuda() ? current_stream(device_).id() : 0);
  }

  DataPtr allocate_on_stream(size_t num_bytes, uint64_t stream) {
    if (num_bytes == 0) return DataPtr(nullptr, nullptr, nullptr, device_);
    std::unique_lock<std::mutex> lock(mutex_);
    if (num_bytes > kMaxRequest) throw_oom(num_bytes);
    process_pending_frees();
    const size_t size = round_size(num_bytes);
    BlockPool& pool = size <= kSmallSize ? small_pool_ : large_pool_;
    Block* block = take_free_block(pool, size, stream);
    if (block == nullptr) block = allocate_segment(lock, pool, size, stream);
    maybe_split(block, size);
    unpoison(device_.is_cpu(), block->ptr, num_bytes);
    block->allocated = true;
    block->requested = size;
    stats_.allocated_bytes.increase(static_cast<int64_t>(size));
    stats_.active_bytes.increase(static_cast<int64_t>(block->size));
    stats_.allocations.increase(1);
    return DataPtr(block->ptr, block, &delete_block, device_);
  }

  void free(Block* block) {
    if (!block->stream_uses.empty() && backend_.record_event != nullptr) {
      // See Note [Stream-aware frees]: the events are recorded before taking the lock.
      std::vector<void*> events;
      for (uint64_t s : block->stream_uses) events.push_back(backend_.record_event(device_.index, s));
      std::lock_guard<std::mutex> guard(mutex_);
      block->stream_uses.clear();
      pending_.push_back(PendingFree{block, std::move(events)});
      return;
    }
    std::lock_guard<std::mutex> guard(mutex_);
    free_locked(block);
  }

  void record_stream(Block* block, uint64_t stream) {
    std::lock_guard<std::mutex> guard(mutex_);
    EMBER_INTERNAL_ASSERT(block->allocated && block->owner == this);
    if (stream == block->stream || backend_.record_event == nullptr) return;  // no events: synchronous
    for (uint64_t s : block->stream_uses)
      if (s == stream) return;
    block->stream_uses.push_back(stream);
  }

  int64_t pending_frees() {
    std::lock_guard<std::mutex> guard(mutex_);
    process_pending_frees();
    return static_cast<int64_t>(pending_.size());
  }

  void free_locked(Block* block) {
    EMBER_INTERNAL_ASSERT(block->allocated && block->owner == this);
    block->allocated = false;
    block->stream_uses.clear();
    stats_.allocated_bytes.decrease(static_cast<int64_t>(block->requested));
    stats_.active_bytes.decrease(static_cast<int64_t>(block->size));
    stats_.allocations.decrease(1);
    poison(device_.is_cpu(), block->ptr, block->size);
    BlockPool& pool = *block->pool;
    if (Block* prev = block->prev; prev != nullptr && !prev->allocated) {
      pool.blocks.erase(prev);
      absorb_next(prev);
      block = prev;
    }
    if (Block* next = block->next; next != nullptr && !next->allocated) {
      pool.blocks.erase(next);
      absorb_next(block);
    }
    pool.blocks.insert(block);
  }

  // Grows `block` over its free neighbour block->next in the segment and recycles the neighbour.
  void absorb_next(Block* block) {
    Block* next = block->next;
    block->size += next->size;
    block->next = next->next;
    if (next->next) next->next->prev = block;
    recycle(next);
  }

  MemoryStats stats() {
    std::lock_guard<std::mutex> guard(mutex_);
    MemoryStats s;
    s.allocated_bytes = stats_.allocated_bytes.current;
    s.allocated_bytes_peak = stats_.allocated_bytes.peak;
    s.reserved_bytes = stats_.reserved_bytes.current;
    s.reserved_bytes_peak = stats_.reserved_bytes.peak;
    s.active_bytes = stats_.active_bytes.current;
    s.active_bytes_peak = stats_.active_bytes.peak;
    s.num_allocs = stats_.allocations.total_allocated;
    s.num_frees = stats_.allocations.total_freed;
    s.num_alloc_retries = stats_.num_alloc_retries;
    s.num_ooms = stats_.num_ooms;
    s.num_segments = stats_.segments.current;
    return s;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> guard(mutex_);
    stats_.allocated_bytes.reset_peak();
    stats_.reserved_bytes.reset_peak();
    stats_.active_bytes.reset_peak();
    stats_.allocations.reset_peak();
    stats_.segments.reset_peak();
  }

  void empty_cache() {
    std::unique_lock<std::mutex> lock(mutex_);
    process_pending_frees();
    release_cached_segments(lock);
  }

  // fork() support; see Note [Caching allocator].
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }

  void set_limit(int64_t num_bytes) {
    std::lock_guard<std::mutex> guard(mutex_);
    limit_ = num_bytes;
  }
  int64_t limit() {
    std::lock_guard<std::mutex> guard(mutex_);
    return limit_;
  }

  std::string summary();

 private:
  struct PendingFree {
    Block* block;
    std::vector<void*> events;  // one per stream that used the block
  };

  // Returns the pending blocks whose events have all completed to their pools.
  void process_pending_frees() {
    for (size_t i = 0; i < pending_.size();) {
      PendingFree& p = pending_[i];
      bool done = true;
      for (void* e : p.events) done = done && backend_.event_done(e);
      if (!done) {
        ++i;
        continue;
      }
      for (void* e : p.events) backend_.destroy_event(e);
      free_locked(p.block);
      pending_[i] = std::move(pending_.back());
      pending_.pop_back();
    }
  }

  // Removes and returns the best-fitting free block of `stream` with at least `size` bytes.
  Block* take_free_block(BlockPool& pool, size_t size, uint64_t stream) {
    Block key;
    key.size = size;
    key.stream = stream;
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
    Block* block = *it;
    pool.blocks.erase(it);
    return block;
  }

  void maybe_split(Block* block, size_t size) {
    const size_t remaining = block->size - size;
    const bool split = block->pool->is_small ? remaining >= kMinBlockSize : remaining > kSmallSize;
    if (!split) return;
    Block* rest = new_block();
    rest->pool = block->pool;
    rest->ptr = block->ptr + size;
    rest->size = remaining;
    rest->stream = block->stream;
    rest->prev = block;
    rest->next = block->next;
    if (block->next) block->next->prev = rest;
    block->next = rest;
    block->size = size;
    block->pool->blocks.insert(rest);
  }

  // Gets a new segment from the backend for a request of `size` rounded bytes; see
  // Note [Caching allocator] for the retry order. Throws OutOfMemoryError.
  Block* allocate_segment(std::unique_lock<std::mutex>& lock, BlockPool& pool, size_t size, uint64_t stream) {
    const size_t preferred = segment_size(size);
    size_t got = 0;
    void* ptr = nullptr;
    for (int attempt = 0; attempt < 2 && ptr == nullptr; ++attempt) {
      if (attempt == 1) {
        release_cached_segments(lock);
        ++stats_.num_alloc_retries;
      }
      if ((ptr = reserve(lock, preferred)) != nullptr) {
        got = preferred;
      } else if (preferred > size && (ptr = reserve(lock, size)) != nullptr) {
        got = size;
      }
    }
    if (ptr == nullptr) throw_oom(size);
    Block* block = new_block();
    block->pool = &pool;
    block->ptr = static_cast<char*>(ptr);
    block->size = got;
    block->stream = stream;
    poison(device_.is_cpu(), block->ptr, got);
    return block;
  }

  // A new segment from the backend, called with the mutex unlocked (see Note [Caching
  // allocator]); nullptr when over the limit or out of memory; Error for any other failure.
  void* reserve(std::unique_lock<std::mutex>& lock, size_t num_bytes) {
    const auto n = static_cast<int64_t>(num_bytes);
    if (limit_ > 0 && stats_.reserved_bytes.current + in_flight_bytes_ + n > limit_) return nullptr;
    in_flight_bytes_ += n;
    lock.unlock();
    void* ptr = backend_.alloc(num_bytes, device_.index);
    const char* error = ptr == nullptr && backend_.alloc_error != nullptr ? backend_.alloc_error(device_.index) : nullptr;
    lock.lock();
    in_flight_bytes_ -= n;
    if (error != nullptr) {
      EMBER_THROW(Error, device_name(device_), ": allocating ", format_size(num_bytes),
                  " from the device failed, and not for lack of memory: ", error);
    }
    if (ptr == nullptr) return nullptr;
    stats_.reserved_bytes.increase(static_cast<int64_t>(num_bytes));
    stats_.segments.increase(1);
    return ptr;
  }

  // Takes every fully free segment out of the pools and returns it to the backend with the
  // mutex unlocked (the statistics change before, under the lock).
  void release_cached_segments(std::unique_lock<std::mutex>& lock) {
    std::vector<char*> segments;
    for (BlockPool* pool : {&small_pool_, &large_pool_}) {
      for (auto it = pool->blocks.begin(); it != pool->blocks.end();) {
        Block* block = *it;
        if (block->prev == nullptr && block->next == nullptr) {
          it = pool->blocks.erase(it);
          unpoison(device_.is_cpu(), block->ptr, block->size);
          segments.push_back(block->ptr);
          stats_.reserved_bytes.decrease(static_cast<int64_t>(block->size));
          stats_.segments.decrease(1);
          recycle(block);
        } else {
          ++it;
        }
      }
    }
    if (segments.empty()) return;
    lock.unlock();
    for (char* ptr : segments) backend_.free(ptr, device_.index);
    lock.lock();
  }

  [[noreturn]] void throw_oom(size_t requested) {
    ++stats_.num_ooms;
    const std::string name = device_name(device_);
    const int64_t reserved = stats_.reserved_bytes.current;
    const int64_t allocated = stats_.allocated_bytes.current;
    std::ostringstream os;
    os << name << " out of memory. Tried to allocate " << format_size(requested) << ". Device " << name;
    if (limit_ > 0) {
      os << " has a total capacity of " << format_size(static_cast<uint64_t>(limit_)) << " (limit) of which "
         << format_size(static_cast<uint64_t>(std::max<int64_t>(0, limit_ - reserved))) << " is free.";
    } else if (size_t free_bytes = 0, total_bytes = 0;
               backend_.mem_info != nullptr && backend_.mem_info(device_.index, &free_bytes, &total_bytes)) {
      os << " has a total capacity of " << format_size(total_bytes) << " of which " << format_size(free_bytes)
         << " is free.";
    } else if (size_t capacity = backend_.device_capacity ? backend_.device_capacity(device_.index) : 0;
               capacity > 0) {
      os << " has a total capacity of " << format_size(capacity) << " of which "
         << format_size(static_cast<uint64_t>(std::max<int64_t>(0, static_cast<int64_t>(capacity) - reserved)))
         << " is not reserved by ember.";
    } else {
      os << " has an unknown total capacity.";
    }
    os << " Of the allocated memory " << format_size(static_cast<uint64_t>(allocated))
       << " is allocated by ember, and " << format_size(static_cast<uint64_t>(reserved - allocated))
       << " is reserved by ember but unallocated.";
    if (limit_ > 0) os << " Raise the limit with set_memory_limit() or " << detail::kMemoryLimitEnv << ".";
    EMBER_THROW(OutOfMemoryError, os.str());
  }

  Block* new_block() {
    Block* block = free_blocks_;
    if (block != nullptr) {
      free_blocks_ = block->free_next;
    } else {
      block_storage_.push_back(std::make_unique<Block[]>(kBlocksPerChunk));
      Block* chunk = block_storage_.back().get();
      for (size_t i = 1; i < kBlocksPerChunk; ++i) recycle(&chunk[i]);
      block = &chunk[0];
    }
    *block = Block{};
    block->owner = this;
    return block;
  }
  void recycle(Block* block) {
    block->free_next = free_blocks_;
    free_blocks_ = block;
  }

  static constexpr size_t kBlocksPerChunk = 256;

  const Device device_;
  const detail::RawMemoryBackend backend_;
  std::mutex mutex_;
  // Everything below is guarded by mutex_.
  int64_t limit_;  // 0: unlimited
  NodeArena node_arena_;  // declared before the pools, which use it
  BlockPool small_pool_;
  BlockPool large_pool_;
  FullStats stats_;
  int64_t in_flight_bytes_ = 0;      // segments being obtained with the mutex unlocked
  std::vector<PendingFree> pending_;  // Note [Stream-aware frees]
  Block* free_blocks_ = nullptr;
  std::vector<std::unique_ptr<Block[]>> block_storage_;
};

void delete_block(void* ctx, void*) {
  Block* block = static_cast<Block*>(ctx);
  block->owner->free(block);
}

// The Block behind `data` when it came from one of our allocators.
Block* block_of(const DataPtr& data) {
  return data.get() != nullptr && data.deleter() == &delete_block ? static_cast<Block*>(data.context()) : nullptr;
}

std::string DeviceCachingAllocator::summary() {
  FullStats s;
  int64_t limit;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    s = stats_;
    limit = limit_;
  }
  constexpr int kWidth = 75;
  const std::string rule_eq = "|" + std::string(kWidth, '=') + "|\n";
  const std::string rule = "|" + std::string(kWidth, '-') + "|\n";
  std::ostringstream os;
  auto line = [&](const std::string& text) {
    std::string t = text.substr(0, kWidth);
    os << "|" << t << std::string(kWidth - t.size(), ' ') << "|\n";
  };
  // " name (22) |" then four 11-wide right-aligned cells separated by " | ".
  auto row = [&](const std::string& name, const std::vector<std::string>& cells) {
    std::ostringstream r;
    r << " " << std::left << std::setw(22) << name << std::right;
    for (const std::string& c : cells) r << "| " << std::setw(10) << c << " ";
    line(r.str());
  };
  auto bytes = [](int64_t n) { return format_size(static_cast<uint64_t>(std::max<int64_t>(0, n))); };
  auto bytes_row = [&](const char* name, const Stat& st) {
    row(name, {bytes(st.current), bytes(st.peak), bytes(st.total_allocated), bytes(st.total_freed)});
  };
  auto count_row = [&](const char* name, const Stat& st) {
    row(name, {std::to_string(st.current), std::to_string(st.peak), std::to_string(st.total_allocated),
               std::to_string(st.total_freed)});
  };
  os << rule_eq;
  line("                  ember memory summary, device " + device_name(device_));
  os << rule;
  line("  OOMs: " + std::to_string(s.num_ooms) + "    alloc retries: " + std::to_string(s.num_alloc_retries) +
       "    limit: " + (limit > 0 ? format_size(static_cast<uint64_t>(limit)) : std::string("none")));
  os << rule_eq;
  row("Metric", {"Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed"});
  os << rule;
  bytes_row("Allocated memory", s.allocated_bytes);
  bytes_row("Active memory", s.active_bytes);
  bytes_row("Reserved memory", s.reserved_bytes);
  row("Reserved, unallocated", {bytes(s.reserved_bytes.current - s.allocated_bytes.current), "", "", ""});
  os << rule;
  count_row("Allocations", s.allocations);
  count_row("Segments (system)", s.segments);
  os << rule_eq;
  return os.str();
}

// ---- the per-device table ----------------------------------------------------------------
std::array<std::atomic<DeviceCachingAllocator*>, kNumSlots> g_allocators{};
std::mutex g_create_mutex;  // serializes allocator creation

void prepare_fork() {
  g_create_mutex.lock();
  for (auto& slot : g_allocators)
    if (DeviceCachingAllocator* a = slot.load(std::memory_order_acquire)) a->lock_for_fork();
}
void after_fork() {
  for (auto it = g_allocators.rbegin(); it != g_allocators.rend(); ++it)
    if (DeviceCachingAllocator* a = it->load(std::memory_order_acquire)) a->unlock_after_fork();
  g_create_mutex.unlock();
}

DeviceCachingAllocator* allocator_for(Device device) {
  if (device.index < 0 || device.index >= kMaxDevicesPerType) [[unlikely]]
    check_device_exists(device, "allocator");  // throws DeviceError
  const int slot = device.flat_index();
  if (DeviceCachingAllocator* a = g_allocators[slot].load(std::memory_order_acquire)) [[likely]]
    return a;
  if (device.is_cuda()) detail::register_cuda_backend();  // explicit and lazy; see core/cuda/cuda_backend.h
  std::lock_guard<std::mutex> guard(g_create_mutex);
  if (DeviceCachingAllocator* a = g_allocators[slot].load(std::memory_order_acquire)) return a;
  BackendSlot backend;
  {
    std::lock_guard<std::mutex> backend_guard(g_backend_mutex);
    backend = g_backends[static_cast<int>(device.type)];
  }
  if (device.is_cuda()) {
    check_device_exists(device, "allocator");
    EMBER_CHECK_T(DeviceError, backend.registered, "allocator: cannot use ", device_name(device),
                  ": the CUDA backend is not initialized");
  }
  const int64_t limit = detail::memory_limit_from_env(device);  // throws ValueError on bad syntax
  static const bool atfork_registered = [] {
    EMBER_CHECK(pthread_atfork(&prepare_fork, &after_fork, &after_fork) == 0,
                "allocator: pthread_atfork failed");
    return true;
  }();
  (void)atfork_registered;
  // Never deleted: see Note [Caching allocator].
  auto* a = new DeviceCachingAllocator(device, backend.backend, limit);
  g_allocators[slot].store(a, std::memory_order_release);
  return a;
}

}  // namespace

Allocator* get_allocator(Device device) { return allocator_for(device); }

MemoryStats memory_stats(Device device) { return allocator_for(device)->stats(); }

void reset_peak_memory_stats(Device device) { allocator_for(device)->reset_peak(); }

void empty_cache(Device device) { allocator_for(device)->empty_cache(); }

std::string memory_summary(Device device) { return allocator_for(device)->summary(); }

void record_stream(const DataPtr& data, Stream stream) {
  Block* block = block_of(data);
  if (block == nullptr || data.device() != stream.device()) return;
  block->owner->record_stream(block, stream.id());
}

void set_memory_limit(Device device, int64_t num_bytes) {
  EMBER_CHECK_T(ValueError, num_bytes >= 0, "set_memory_limit: expected num_bytes >= 0 (0 = unlimited), got ",
                num_bytes);
  allocator_for(device)->set_limit(num_bytes);
}

int64_t memory_limit(Device device) { return allocator_for(device)->limit(); }

namespace detail {

DataPtr allocate_on_stream(Device device, size_t num_bytes, uint64_t stream) {
  return allocator_for(device)->allocate_on_stream(num_bytes, stream);
}

int64_t pending_frees(Device device) { return allocator_for(device)->pending_frees(); }

void register_raw_memory_backend(DeviceType type, RawMemoryBackend backend) {
  EMBER_CHECK(backend.alloc != nullptr && backend.free != nullptr,
              "register_raw_memory_backend: alloc and free must be set");
  std::lock_guard<std::mutex> guard(g_backend_mutex);
  g_backends[static_cast<int>(type)] = BackendSlot{true, backend};
}

RawMemoryBackend raw_memory_backend(DeviceType type) {
  std::lock_guard<std::mutex> guard(g_backend_mutex);
  const BackendSlot& slot = g_backends[static_cast<int>(type)];
  EMBER_CHECK(slot.registered, "raw_memory_backend: no backend registered for ",
              type == DeviceType::CUDA ? "cuda (ember was built without CUDA?)" : "cpu");
  return slot.backend;
}

}  // namespace detail
}  // namespace ember
