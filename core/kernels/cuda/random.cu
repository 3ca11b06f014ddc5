// CUDA launcher of the random fills: kernels::visit_random picks the Philox-block functor of
// core/kernels/random.h (the mapping the CPU grid-emulation tests run too) and this file
// launches it over the blocks, so a (seed, offset) gives the CPU path's numbers.
#include "core/cuda/cuda_device.h"
#include "core/kernels/cuda/kernels.h"
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/random.h"

namespace ember::cuda {

void random(const kernels::RandomLaunch& r, int device_index) {
  if (r.t.n <= 0) return;
  CudaDeviceGuard guard(device_index);
  kernels::visit_random(r, [&](const auto& f, int64_t blocks) { launch_elements("random", blocks, f, device_index); });
}

}  // namespace ember::cuda
