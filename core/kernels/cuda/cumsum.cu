// CUDA kernel of cumsum_stub (core/ops/cumsum_stubs.h): one thread per line running CumsumLineF
// (core/kernels/cumsum.h), the functor the CPU kernel runs.
#include "core/cuda/cuda_device.h"
#include "core/kernels/cuda/kernels.h"
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/cumsum.h"

namespace ember::cuda {

void cumsum(DType dtype, int64_t outer, int64_t n, int64_t inner, bool reverse, const void* in, void* out,
            int device_index) {
  CudaDeviceGuard guard(device_index);
  kernels::visit_cumsum(dtype, kernels::LineGeometry{inner, n}, reverse, in, out, outer * inner,
                        [&](const auto& f, int64_t lines) { launch_elements("cumsum", lines, f, device_index); });
}

}  // namespace ember::cuda
