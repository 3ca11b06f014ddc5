// Device count, device guard and the error reporting behind EMBER_CUDA_CHECK / EMBER_CUBLAS_CHECK.
#include "core/cuda/cuda_device.h"

#include <algorithm>

#include "core/cuda/cuda_backend.h"
#include "core/cuda/cuda_check.h"
#include "core/device.h"
#include "core/error.h"

namespace ember {
namespace cuda {
namespace {

std::string current_device_name() {
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return "cuda:?";
  }
  return "cuda:" + std::to_string(dev);
}

}  // namespace

namespace detail {

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  (void)cudaGetLastError();  // clear a non-sticky error so the next check does not report it again
  const std::string device = current_device_name();
  if (err == cudaErrorMemoryAllocation) {
    ::ember::detail::throw_error<OutOfMemoryError>(file, line, "CUDA error: ", cudaGetErrorString(err), " (",
                                                   cudaGetErrorName(err), ") in `", expr, "` on ", device);
  }
  // See Note [CUDA error reporting]: an error from a kernel surfaces at a later call.
  const char* last = last_launched_kernel();
  const std::string hint =
      last == nullptr ? std::string()
                      : std::string("; the last kernel launched by this thread was `") + last +
                            "` (kernel errors are reported by the next synchronizing call; run with "
                            "EMBER_CUDA_LAUNCH_BLOCKING=1 to name the kernel that failed)";
  ::ember::detail::throw_error<Error>(file, line, "CUDA error: ", cudaGetErrorString(err), " (", cudaGetErrorName(err),
                                      ") in `", expr, "` on ", device, hint);
}

void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file, int line) {
  ::ember::detail::throw_error<Error>(file, line, "cuBLAS error: ", cublasGetStatusString(status), " (",
                                      cublasGetStatusName(status), ") in `", expr, "` on ", current_device_name());
}

}  // namespace detail

CudaDeviceGuard::CudaDeviceGuard(int device_index) : current_(device_index) {
  EMBER_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != current_) EMBER_CUDA_CHECK(cudaSetDevice(current_));
}

CudaDeviceGuard::~CudaDeviceGuard() {
  if (previous_ != current_ && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
}

}  // namespace cuda

int cuda_device_count() {
  // Cached: the count cannot change within a process. No driver or no device yields 0.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return std::clamp(n, 0, kMaxDevicesPerType);
  }();
  detail::register_cuda_backend();
  return count;
}

}  // namespace ember
