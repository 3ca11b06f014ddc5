#include "core/pinned_memory.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>

#include "core/error.h"

namespace ember {

// Note [Pinned host memory]
// cudaHostAlloc and cudaFreeHost are slow (they map pages for the device and synchronize), so
// pinned blocks are cached as device blocks are (Note [Caching allocator] in allocator.cpp),
// more simply: a request is rounded up to a power of two (at least 512 bytes) and served by a
// free block of exactly that size, or by a new system block. A pinned block is typically the
// source of an asynchronous copy to a device (to(cuda, non_blocking=true)); the copy may still
// be reading it when the tensor that owns it is freed. So the copy records its stream on the
// block (record_stream), and at free an event is recorded on each recorded stream; the block
// waits in `pending_` until every event has completed (checked without blocking at each
// allocate and empty_cache), then becomes reusable, as in Note [Stream-aware frees]. A block
// with no recorded use is reusable at once. The backend calls run under the mutex except the
// system alloc and free (which may take milliseconds).
//
// Who uses it: Tensor::pin_memory() copies a CPU tensor into a block (its Storage's deleter
// returns the block here, and Storage::is_pinned() recognizes the deleter); a copy between a
// pinned tensor and a CUDA device with non_blocking=true (copy_, to) is queued on the device's
// current stream and not waited for, after detail::prepare_async_host_copy recorded that stream
// on the block; from pageable memory the same call waits for the copy (the host memory could be
// reused or freed at once). to(cpu, non_blocking=true) from a CUDA tensor returns a pinned
// tensor written asynchronously, as PyTorch's: synchronize the stream before reading it. The
// DataLoader's pin_memory=true pins each batch (Note [Pinned batches] in data/detail/pin_batch.h).
// Blocks come from cudaHostAlloc with the default flags, which under unified addressing (every
// 64-bit platform CUDA 13 supports) are usable from every device: a pinned tensor is not tied
// to one GPU, so nothing like PyTorch's pin_memory_device is needed.

namespace {
constexpr size_t kMinBlock = 512;

// The block size for n bytes: the power of two >= n, at least kMinBlock; 0 when none fits in
// size_t (the doubling would wrap to 0 and never end).
size_t round_size(size_t n) {
  size_t s = kMinBlock;
  while (s < n) {
    if (s > std::numeric_limits<size_t>::max() / 2) return 0;
    s <<= 1;
  }
  return s;
}

std::mutex g_backend_mu;
detail::PinnedMemoryBackend g_backend;  // guarded by g_backend_mu
bool g_has_backend = false;             // guarded by g_backend_mu
std::atomic<PinnedAllocator*> g_override{nullptr};
}  // namespace

namespace detail {
void register_pinned_memory_backend(PinnedMemoryBackend backend) {
  std::lock_guard<std::mutex> lock(g_backend_mu);
  g_backend = backend;
  g_has_backend = true;
}
}  // namespace detail

PinnedAllocator::PinnedAllocator(detail::PinnedMemoryBackend backend) : backend_(backend) {
  EMBER_INTERNAL_ASSERT(backend_.alloc != nullptr && backend_.free != nullptr, "PinnedAllocator: incomplete backend");
}

PinnedAllocator::~PinnedAllocator() {
  try {
    empty_cache();
  } catch (...) {
    // A failing cudaFreeHost at exit: nothing left to do about it.
  }
}

DataPtr PinnedAllocator::allocate(size_t num_bytes) {
  if (num_bytes == 0) return DataPtr(nullptr, nullptr, nullptr, Device::cpu());
  const size_t size = round_size(num_bytes);
  EMBER_CHECK_T(OutOfMemoryError, size != 0, "pin_memory: cannot allocate ", num_bytes,
                " bytes of pinned host memory (no block size is that large)");
  {
    std::lock_guard<std::mutex> lock(mu_);
    process_events_locked();
    auto it = free_.find(size);
    if (it != free_.end()) {
      void* ptr = it->second;
      free_.erase(it);
      blocks_.at(reinterpret_cast<uintptr_t>(ptr)).in_use = true;
      return DataPtr(ptr, this, &PinnedAllocator::delete_block, Device::cpu());
    }
  }
  void* ptr = backend_.alloc(size);
  if (ptr == nullptr) {
    empty_cache();
    ptr = backend_.alloc(size);
  }
  if (ptr == nullptr) {
    const Stats s = stats();
    EMBER_THROW(OutOfMemoryError, "pin_memory: cannot allocate ", size, " bytes of pinned host memory (requested ",
                num_bytes, "; ", s.allocated_bytes, " bytes allocated, ", s.reserved_bytes,
                " reserved by the pinned cache)");
  }
  std::lock_guard<std::mutex> lock(mu_);
  Block& b = blocks_[reinterpret_cast<uintptr_t>(ptr)];
  b.size = size;
  b.in_use = true;
  ++system_allocs_;
  return DataPtr(ptr, this, &PinnedAllocator::delete_block, Device::cpu());
}

void PinnedAllocator::delete_block(void* ctx, void* ptr) { static_cast<PinnedAllocator*>(ctx)->release(ptr); }

void PinnedAllocator::release(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
  EMBER_INTERNAL_ASSERT(it != blocks_.end() && it->second.in_use, "PinnedAllocator: freeing an unknown block");
  Block& b = it->second;
  b.in_use = false;
  if (b.streams.empty() || backend_.record_event == nullptr) {
    b.streams.clear();
    free_.emplace(b.size, ptr);
    return;
  }
  for (const Stream& s : b.streams) b.events.push_back(backend_.record_event(s.device().index, s.id()));
  b.streams.clear();
  pending_.push_back(ptr);
}

void PinnedAllocator::process_events_locked() {
  auto done = [&](void* ptr) {
    Block& b = blocks_.at(reinterpret_cast<uintptr_t>(ptr));
    for (void* e : b.events) {
      if (e != nullptr && !backend_.event_done(e)) return false;
    }
    for (void* e : b.events) {
      if (e != nullptr && backend_.destroy_event != nullptr) backend_.destroy_event(e);
    }
    b.events.clear();
    free_.emplace(b.size, ptr);
    return true;
  };
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), done), pending_.end());
}

void PinnedAllocator::record_stream(const void* ptr, Stream stream) {
  if (!stream.device().is_cuda()) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.upper_bound(reinterpret_cast<uintptr_t>(ptr));
  if (it == blocks_.begin()) return;
  --it;
  Block& b = it->second;
  if (!b.in_use || reinterpret_cast<uintptr_t>(ptr) >= it->first + b.size) return;
  if (std::find(b.streams.begin(), b.streams.end(), stream) == b.streams.end()) b.streams.push_back(stream);
}

bool PinnedAllocator::contains(const void* ptr) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.upper_bound(reinterpret_cast<uintptr_t>(ptr));
  if (it == blocks_.begin()) return false;
  --it;
  return it->second.in_use && reinterpret_cast<uintptr_t>(ptr) < it->first + it->second.size;
}

std::vector<void*> PinnedAllocator::take_free_locked() {
  std::vector<void*> out;
  for (const auto& [size, ptr] : free_) {
    out.push_back(ptr);
    blocks_.erase(reinterpret_cast<uintptr_t>(ptr));
  }
  free_.clear();
  return out;
}

void PinnedAllocator::empty_cache() {
  std::vector<void*> to_free;
  {
    std::lock_guard<std::mutex> lock(mu_);
    process_events_locked();
    to_free = take_free_locked();
  }
  for (void* ptr : to_free) backend_.free(ptr);
}

PinnedAllocator::Stats PinnedAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s;
  for (const auto& [addr, b] : blocks_) {
    s.reserved_bytes += static_cast<int64_t>(b.size);
    if (b.in_use) s.allocated_bytes += static_cast<int64_t>(b.size);
  }
  s.cached_blocks = static_cast<int64_t>(free_.size());
  s.pending_blocks = static_cast<int64_t>(pending_.size());
  s.system_allocs = system_allocs_;
  return s;
}

PinnedAllocator* PinnedAllocator::owner_of(const DataPtr& data) {
  return data.deleter() == &PinnedAllocator::delete_block ? static_cast<PinnedAllocator*>(data.context()) : nullptr;
}

bool pinned_memory_available() { return g_override.load() != nullptr || cuda_device_count() > 0; }

namespace detail {
PinnedAllocator* set_pinned_allocator_override(PinnedAllocator* allocator) { return g_override.exchange(allocator); }

bool prepare_async_host_copy(const Storage& host, Stream stream, bool non_blocking) {
  if (!non_blocking || !host.defined()) return false;
  PinnedAllocator* owner = PinnedAllocator::owner_of(host.data_ptr());
  if (owner == nullptr) return false;
  owner->record_stream(host.data(), stream);
  return true;
}
}  // namespace detail

PinnedAllocator& pinned_allocator() {
  if (PinnedAllocator* o = g_override.load()) return *o;
  EMBER_CHECK_T(DeviceError, cuda_device_count() > 0, "pin_memory: pinned host memory needs a CUDA device, and ",
                cuda_device_count(), " are visible (ember built without CUDA, or no GPU)");
  static PinnedAllocator* allocator = [] {
    std::lock_guard<std::mutex> lock(g_backend_mu);
    EMBER_CHECK(g_has_backend, "pin_memory: no pinned-memory backend is registered");
    return new PinnedAllocator(g_backend);  // leaked: tensors may outlive static destruction
  }();
  return *allocator;
}

}  // namespace ember
