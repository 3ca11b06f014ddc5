#include "core/cuda/cuda_memory.h"

#include <cuda_runtime.h>

#include <string>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"

namespace ember::cuda {
namespace {

// Makes `device_index` current without throwing; restores the previous device on destruction.
class QuietDeviceGuard {
 public:
  explicit QuietDeviceGuard(int device_index) : current_(device_index) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      (void)cudaGetLastError();
      ok_ = false;
      return;
    }
    if (previous_ != current_ && cudaSetDevice(current_) != cudaSuccess) {
      (void)cudaGetLastError();
      ok_ = false;
    }
  }
  ~QuietDeviceGuard() {
    if (ok_ && previous_ != current_ && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
  }
  bool ok() const { return ok_; }

 private:
  int previous_ = 0;
  int current_ = 0;
  bool ok_ = true;
};

// What the calling thread's last failed cuda_alloc hit, when it was not out of memory.
thread_local std::string t_alloc_error;

void* cuda_alloc(size_t num_bytes, int device_index) {
  t_alloc_error.clear();
  QuietDeviceGuard guard(device_index);
  if (!guard.ok()) {
    t_alloc_error = "cannot make cuda:" + std::to_string(device_index) + " current";
    return nullptr;
  }
  void* ptr = nullptr;
  if (const cudaError_t err = cudaMalloc(&ptr, num_bytes); err != cudaSuccess) {
    (void)cudaGetLastError();  // cudaErrorMemoryAllocation is not sticky: clear it
    if (err != cudaErrorMemoryAllocation) {
      t_alloc_error = std::string("cudaMalloc: ") + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")";
    }
    return nullptr;
  }
  return ptr;
}

const char* cuda_alloc_error(int) { return t_alloc_error.empty() ? nullptr : t_alloc_error.c_str(); }

bool cuda_mem_info(int device_index, size_t* free_bytes, size_t* total_bytes) {
  QuietDeviceGuard guard(device_index);
  if (!guard.ok() || cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

// Events of Note [Stream-aware frees] (core/allocator.cpp). A failure to create or record one
// leaves nothing to wait on: nullptr, which event_done reports as complete after a device sync.
void* cuda_record_event(int device_index, uint64_t stream) {
  QuietDeviceGuard guard(device_index);
  cudaEvent_t event = nullptr;
  if (!guard.ok() || cudaEventCreateWithFlags(&event, cudaEventDisableTiming) != cudaSuccess ||
      cudaEventRecord(event, to_cuda_stream(stream)) != cudaSuccess) {
    (void)cudaGetLastError();
    if (event != nullptr) (void)cudaEventDestroy(event);
    if (cudaDeviceSynchronize() != cudaSuccess) (void)cudaGetLastError();
    return nullptr;
  }
  return event;
}

bool cuda_event_done(void* event) {
  if (event == nullptr) return true;
  const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (err == cudaErrorNotReady) return false;
  if (err != cudaSuccess) (void)cudaGetLastError();  // a failed kernel: reported by the next checked call
  return true;
}

void cuda_destroy_event(void* event) {
  if (event != nullptr && cudaEventDestroy(static_cast<cudaEvent_t>(event)) != cudaSuccess) (void)cudaGetLastError();
}

void cuda_free(void* ptr, int device_index) {
  QuietDeviceGuard guard(device_index);
  // cudaFree synchronizes the device, so no kernel still uses the segment. Errors here (for
  // example cudaErrorCudartUnloading at process exit) leave nothing to recover.
  if (cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
}

// Pinned host memory (core/pinned_memory.h): cudaHostAlloc through a checked call; out of
// memory is nullptr (the pinned allocator empties its cache and retries), anything else throws.
void* cuda_host_alloc(size_t num_bytes) {
  void* ptr = nullptr;
  if (const cudaError_t err = cudaHostAlloc(&ptr, num_bytes, cudaHostAllocDefault); err != cudaSuccess) {
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    EMBER_CUDA_CHECK(err);
  }
  return ptr;
}

void cuda_host_free(void* ptr) { EMBER_CUDA_CHECK(cudaFreeHost(ptr)); }

size_t cuda_capacity(int device_index) {
  QuietDeviceGuard guard(device_index);
  if (!guard.ok()) return 0;
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return total_bytes;
}

}  // namespace

ember::detail::RawMemoryBackend cuda_raw_memory_backend() {
  ember::detail::RawMemoryBackend b{&cuda_alloc, &cuda_free, &cuda_capacity};
  b.alloc_error = &cuda_alloc_error;
  b.mem_info = &cuda_mem_info;
  b.record_event = &cuda_record_event;
  b.event_done = &cuda_event_done;
  b.destroy_event = &cuda_destroy_event;
  return b;
}

ember::detail::PinnedMemoryBackend cuda_pinned_memory_backend() {
  return {.alloc = &cuda_host_alloc,
          .free = &cuda_host_free,
          .record_event = &cuda_record_event,
          .event_done = &cuda_event_done,
          .destroy_event = &cuda_destroy_event};
}

}  // namespace ember::cuda
