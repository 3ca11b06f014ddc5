// CUDA kernels of softmax / log_softmax and their backward (the stubs of core/ops/softmax_stubs.h): one thread per line running the
// functors of core/kernels/softmax.h (the CPU path runs the same functors per line).
#include "core/cuda/cuda_device.h"
#include "core/kernels/cuda/kernels.h"
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/softmax.h"

namespace ember::cuda {

void softmax(DType dtype, int64_t outer, int64_t n, int64_t inner, bool log, const void* in, void* out,
             int device_index) {
  CudaDeviceGuard guard(device_index);
  const kernels::LineGeometry g{inner, n};
  const int64_t lines = outer * inner;
  EMBER_DISPATCH_FLOATING(dtype, log ? "log_softmax" : "softmax", [&] {
    launch_elements(log ? "log_softmax" : "softmax", lines,
                    kernels::SoftmaxLineF<scalar_t>{g, log, static_cast<const scalar_t*>(in), static_cast<scalar_t*>(out)},
                    device_index);
  });
}

void softmax_backward(DType dtype, int64_t outer, int64_t n, int64_t inner, bool log, const void* grad,
                      const void* y, void* grad_in, int device_index) {
  CudaDeviceGuard guard(device_index);
  const kernels::LineGeometry g{inner, n};
  const int64_t lines = outer * inner;
  const char* name = log ? "log_softmax_backward" : "softmax_backward";
  EMBER_DISPATCH_FLOATING(dtype, name, [&] {
    launch_elements(name, lines,
                    kernels::SoftmaxBackwardLineF<scalar_t>{g, log, static_cast<const scalar_t*>(grad),
                                                            static_cast<const scalar_t*>(y),
                                                            static_cast<scalar_t*>(grad_in)},
                    device_index);
  });
}

}  // namespace ember::cuda
