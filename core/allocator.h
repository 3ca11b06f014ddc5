// Memory for tensors: DataPtr (an owning pointer with a deleter) and the per-device caching
// allocator in the manner of PyTorch's CUDA caching allocator, written once for CPU and CUDA.
// Every function here is thread-safe; each device's allocator has its own mutex.
// See Note [Caching allocator] in allocator.cpp for the pools, size classes and split/merge rules.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/device.h"
#include "core/stream.h"

namespace ember {

/// An owning pointer to device memory. Move-only; calls deleter(ctx, ptr) when destroyed.
class DataPtr {
 public:
  using Deleter = void (*)(void* ctx, void* ptr);
  DataPtr() = default;
  DataPtr(void* ptr, void* ctx, Deleter deleter, Device device)
      : ptr_(ptr), ctx_(ctx), deleter_(deleter), device_(device) {}
  DataPtr(const DataPtr&) = delete;
  DataPtr& operator=(const DataPtr&) = delete;
  DataPtr(DataPtr&& o) noexcept { *this = std::move(o); }
  DataPtr& operator=(DataPtr&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = o.ptr_; ctx_ = o.ctx_; deleter_ = o.deleter_; device_ = o.device_;
      o.ptr_ = nullptr; o.ctx_ = nullptr; o.deleter_ = nullptr;
    }
    return *this;
  }
  ~DataPtr() { reset(); }
  void reset() {
    if (deleter_) deleter_(ctx_, ptr_);
    ptr_ = nullptr; ctx_ = nullptr; deleter_ = nullptr;
  }
  void* get() const { return ptr_; }
  void* context() const { return ctx_; }
  Deleter deleter() const { return deleter_; }
  Device device() const { return device_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  void* ptr_ = nullptr;
  void* ctx_ = nullptr;
  Deleter deleter_ = nullptr;
  Device device_;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Returns at least num_bytes of memory aligned to 64 bytes. num_bytes == 0 returns a
  /// DataPtr whose get() is nullptr (no deleter, not counted in the stats).
  /// Throws OutOfMemoryError when the device (or its configured limit) cannot satisfy it.
  virtual DataPtr allocate(size_t num_bytes) = 0;
};

/// The caching allocator of `device`. Throws DeviceError for a device that does not exist
/// (check_device_exists in core/device.h): an index outside [0, kMaxDevicesPerType), or a CUDA
/// device past cuda_device_count() (every one when ember is built without CUDA).
Allocator* get_allocator(Device device);

struct MemoryStats {
  // Bytes handed out to tensors (rounded block sizes), current and peak.
  int64_t allocated_bytes = 0, allocated_bytes_peak = 0;
  // Bytes obtained from the system (malloc / cudaMalloc), cached or in use.
  int64_t reserved_bytes = 0, reserved_bytes_peak = 0;
  // Bytes of blocks in use including split remainders held by them.
  int64_t active_bytes = 0, active_bytes_peak = 0;
  int64_t num_allocs = 0;         // allocate() calls that succeeded
  int64_t num_frees = 0;
  int64_t num_alloc_retries = 0;  // times the cache was freed to retry an allocation
  int64_t num_ooms = 0;           // OutOfMemoryErrors thrown
  int64_t num_segments = 0;       // system allocations currently held
};

MemoryStats memory_stats(Device device);
void reset_peak_memory_stats(Device device);
/// Returns all cached, unused blocks of `device` to the system.
void empty_cache(Device device);
/// A human-readable table of the stats, as torch.cuda.memory_summary() prints.
std::string memory_summary(Device device);
/// Caps the bytes `device` may reserve from the system; 0 removes the cap.
/// The environment variable EMBER_MEMORY_LIMIT ("cpu:0=64MB,cpu=1GB,cuda:0=8GB"; units B, KB, MB, GB)
/// sets initial limits, read when a device's allocator is first used.
void set_memory_limit(Device device, int64_t num_bytes);
int64_t memory_limit(Device device);

/// Marks the memory of `data` (from get_allocator) as used by work queued on `stream`, so that
/// when it is freed it is not reused, by any stream, before that work is done (PyTorch's
/// Tensor.record_stream). See Note [Stream-aware frees] in allocator.cpp. No-op for memory from
/// another allocator, for the stream it was allocated on, and on devices without events (CPU).
void record_stream(const DataPtr& data, Stream stream);

namespace detail {
/// Raw system memory for a device type; the CUDA backend registers cudaMalloc/cudaFree here.
/// The fields after device_capacity are optional (null: not supported by the backend).
struct RawMemoryBackend {
  void* (*alloc)(size_t num_bytes, int device_index);  // returns nullptr on failure
  void (*free)(void* ptr, int device_index);
  size_t (*device_capacity)(int device_index);          // total bytes, 0 if unknown
  /// After alloc returned nullptr on this thread: null when it ran out of memory, else what
  /// failed (the allocator then throws Error with it, not OutOfMemoryError).
  const char* (*alloc_error)(int device_index) = nullptr;
  /// Free and total bytes of the device as its driver reports them; false if unknown.
  bool (*mem_info)(int device_index, size_t* free_bytes, size_t* total_bytes) = nullptr;
  /// An event recorded on `stream` now; event_done(e) tells whether the work before it
  /// finished; destroy_event releases it. See Note [Stream-aware frees].
  void* (*record_event)(int device_index, uint64_t stream) = nullptr;
  bool (*event_done)(void* event) = nullptr;
  void (*destroy_event)(void* event) = nullptr;
};
/// Installs the backend of `type`. Allocators created afterwards use it; an existing allocator
/// keeps the backend it was created with (it must free its segments with the same functions).
/// CPU has an aligned_alloc/free backend from the start; CUDA has none until core/cuda registers.
void register_raw_memory_backend(DeviceType type, RawMemoryBackend backend);
/// The backend allocators of `type` created now would use; throws Error when none is registered.
RawMemoryBackend raw_memory_backend(DeviceType type);
/// allocate() for a given stream id: blocks are only reused by the stream they were made for.
/// Allocator::allocate() uses the calling thread's current stream of the device (0 on CPU).
/// See Note [Caching allocator].
DataPtr allocate_on_stream(Device device, size_t num_bytes, uint64_t stream);
/// Blocks freed while their recorded streams' events are pending (Note [Stream-aware frees]).
int64_t pending_frees(Device device);
}  // namespace detail

}  // namespace ember
