// after_launch and EMBER_CUDA_LAUNCH_BLOCKING (Note [CUDA error reporting], cuda_check.h).
#include <cstdlib>
#include <cstring>

#include "core/cuda/cuda_check.h"
#include "core/env.h"
#include "core/error.h"

namespace ember::cuda::detail {
namespace {
thread_local const char* t_last_kernel = nullptr;
}  // namespace

bool launch_blocking() {
  static const bool blocking = env::flag("EMBER_CUDA_LAUNCH_BLOCKING", false);
  return blocking;
}

const char* last_launched_kernel() { return t_last_kernel; }

void after_launch(const char* kernel_name, cudaStream_t stream) {
  const cudaError_t launch_err = cudaGetLastError();
  if (launch_err != cudaSuccess) {
    EMBER_THROW(Error, "CUDA error: ", cudaGetErrorString(launch_err), " (", cudaGetErrorName(launch_err),
                ") launching kernel `", kernel_name, "`");
  }
  t_last_kernel = kernel_name;
  if (launch_blocking()) {
    const cudaError_t err = cudaStreamSynchronize(stream);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      EMBER_THROW(Error, "CUDA error: ", cudaGetErrorString(err), " (", cudaGetErrorName(err), ") in kernel `",
                  kernel_name, "` (EMBER_CUDA_LAUNCH_BLOCKING=1)");
    }
  }
}

}  // namespace ember::cuda::detail
