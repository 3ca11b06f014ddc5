#include "core/cuda/cuda_memory.h"

#include <cuda_runtime.h>

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

void* cuda_alloc(size_t num_bytes, int device_index) {
  QuietDeviceGuard guard(device_index);
  if (!guard.ok()) return nullptr;
  void* ptr = nullptr;
  if (cudaMalloc(&ptr, num_bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // cudaErrorMemoryAllocation is not sticky: clear it
    return nullptr;
  }
  return ptr;
}

void cuda_free(void* ptr, int device_index) {
  QuietDeviceGuard guard(device_index);
  // cudaFree synchronizes the device, so no kernel still uses the segment. Errors here (for
  // example cudaErrorCudartUnloading at process exit) leave nothing to recover.
  if (cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
}

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
  return ember::detail::RawMemoryBackend{&cuda_alloc, &cuda_free, &cuda_capacity};
}

}  // namespace ember::cuda
