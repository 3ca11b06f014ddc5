// The CUDA launcher of launch-grid functors (Note [Kernels as launch-grid functors],
// core/kernels/launch.h): functor_kernel runs the same body that kernels::emulate_launch runs on
// the CPU. Launches go to the current stream of the device (Note [Current stream]) and are
// checked by after_launch (Note [CUDA error reporting]). Include from .cu files only.
#pragma once
#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "core/kernels/launch.h"

namespace ember::cuda {

template <typename K>
__global__ void functor_kernel(K k) {
  kernels::LaunchIndex ix;
  ix.block_idx = kernels::Dim3{blockIdx.x, blockIdx.y, blockIdx.z};
  ix.thread_idx = kernels::Dim3{threadIdx.x, threadIdx.y, threadIdx.z};
  ix.block_dim = kernels::Dim3{blockDim.x, blockDim.y, blockDim.z};
  ix.grid_dim = kernels::Dim3{gridDim.x, gridDim.y, gridDim.z};
  k(ix);
}

/// kernel<<<cfg.grid, cfg.block, 0, stream>>>: asynchronous; a bad launch throws Error naming cfg.name.
template <typename K>
void launch(const kernels::LaunchConfig& cfg, const K& k, cudaStream_t stream) {
  functor_kernel<K><<<dim3(cfg.grid.x, cfg.grid.y, cfg.grid.z), dim3(cfg.block.x, cfg.block.y, cfg.block.z), 0,
                      stream>>>(k);
  detail::after_launch(cfg.name, stream);
}

/// f(i) for every i in [0, n) on the current stream of the current device (a no-op for n == 0).
template <typename F>
void launch_elements(const char* name, int64_t n, const F& f, int device_index) {
  if (n <= 0) return;
  launch(kernels::launch_config_1d(name, n), kernels::element_kernel(f, n), current_stream(device_index));
}

}  // namespace ember::cuda
