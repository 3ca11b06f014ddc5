// Device selection helpers of the CUDA backend: an RAII guard that makes a device current on
// the calling thread and restores the previous one.
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

}  // namespace ember::cuda
