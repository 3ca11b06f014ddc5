// Device selection helpers of the CUDA backend: an RAII guard that makes a device current on
// the calling thread and restores the previous one, and the device owning a pointer.
// Thread-safe (the current device is per host thread).
#pragma once

namespace ember::cuda {

/// Makes `device_index` current for the guard's lifetime. Throws Error when it cannot be set.
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int device_index);
  ~CudaDeviceGuard();
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_ = 0;
  int current_ = 0;
};

/// The CUDA device `ptr` (device memory from the caching allocator) lives on; 0 with one device.
/// Throws Error when ptr is not CUDA device memory.
int device_of_pointer(const void* ptr);

}  // namespace ember::cuda
