// How a hand-written kernel is written (Note [Kernels as launch-grid functors]): a functor whose
// EMBER_HOST_DEVICE operator()(const LaunchIndex&) is the body of one CUDA thread. The CUDA
// launcher (core/kernels/cuda/launch.cuh) runs it as a __global__ function; emulate_launch() below runs
// the very same body on the CPU for every block and thread of the grid, in order, so CPU tests
// exercise its index arithmetic and bounds. Header-only, no CUDA headers; thread-safe (pure).
#pragma once
#include <cstdint>

#include "core/macros.h"

namespace ember::kernels {

// Note [Kernels as launch-grid functors]
// No development or CI machine has a GPU, so a CUDA kernel body must be testable without one:
//  * The body is a functor `k` with `EMBER_HOST_DEVICE void operator()(const LaunchIndex& ix) const`
//    that reads blockIdx/threadIdx/blockDim/gridDim only through `ix`.
//  * Most kernels are per-element (or per-row) functors `f(int64_t i)` wrapped in ElementKernel,
//    which walks i over [0, n) with a grid-stride loop: the grid may be smaller than n (the
//    launcher caps it at kMaxLaunchBlocks) and n need not be a multiple of the block.
//  * emulate_launch(cfg, k) calls k for every (block, thread) of cfg sequentially. Tests run
//    every such kernel with grids smaller than, equal to and larger than the work, and compare
//    with the CPU op; an index that misses, repeats or overruns shows up there.
//  * The functor's body may not cooperate across threads (no __shared__, no __syncthreads, no
//    warp shuffles): reductions, scans and sorts inside a block or across the grid use CUB,
//    cuBLAS or cuDNN. The one cross-thread primitive is an atomic from core/kernels/atomic.h,
//    which the sequential emulation runs as a plain read-modify-write.
//  * Bounds of data-dependent indices are checked before the launch (see IndexBoundsF), so
//    a bad index is an IndexError naming the op, never a device assert.

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// The built-in indices of one CUDA thread (x dimension used by ember's kernels).
struct LaunchIndex {
  Dim3 block_idx, thread_idx, block_dim, grid_dim;
  /// blockIdx.x * blockDim.x + threadIdx.x, in 64 bits.
  EMBER_HOST_DEVICE int64_t global_x() const {
    return static_cast<int64_t>(block_idx.x) * block_dim.x + thread_idx.x;
  }
  /// blockDim.x * gridDim.x: the step of a grid-stride loop.
  EMBER_HOST_DEVICE int64_t stride_x() const { return static_cast<int64_t>(block_dim.x) * grid_dim.x; }
};

struct LaunchConfig {
  Dim3 grid, block;
  const char* name = "kernel";  // named in errors (see core/kernels/cuda/launch.cuh)
};

constexpr unsigned kLaunchThreads = 256;
constexpr int64_t kMaxLaunchBlocks = int64_t{1} << 16;  // beyond 16M items the grid strides

/// A 1-D grid for `n` work items: ceil(n / threads) blocks, at least 1, at most max_blocks.
inline LaunchConfig launch_config_1d(const char* name, int64_t n, unsigned threads = kLaunchThreads,
                                     int64_t max_blocks = kMaxLaunchBlocks) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > max_blocks) blocks = max_blocks;
  LaunchConfig cfg;
  cfg.grid.x = static_cast<unsigned>(blocks);
  cfg.block.x = threads;
  cfg.name = name;
  return cfg;
}

/// Runs f(i) for every i in [0, n) with a grid-stride loop: the kernel for per-element and
/// per-row functors. F: `EMBER_HOST_DEVICE void operator()(int64_t i) const`.
template <typename F>
struct ElementKernel {
  F f;
  int64_t n;
  EMBER_HOST_DEVICE void operator()(const LaunchIndex& ix) const {
    for (int64_t i = ix.global_x(); i < n; i += ix.stride_x()) f(i);
  }
};
template <typename F>
ElementKernel<F> element_kernel(const F& f, int64_t n) {
  return ElementKernel<F>{f, n};
}

/// The CPU emulation of `kernel<<<cfg.grid, cfg.block>>>()`: calls kernel(ix) for every block
/// and every thread, blocks in order and threads in order within a block.
template <typename K>
void emulate_launch(const LaunchConfig& cfg, const K& kernel) {
  LaunchIndex ix;
  ix.grid_dim = cfg.grid;
  ix.block_dim = cfg.block;
  for (unsigned bz = 0; bz < cfg.grid.z; ++bz)
    for (unsigned by = 0; by < cfg.grid.y; ++by)
      for (unsigned bx = 0; bx < cfg.grid.x; ++bx)
        for (unsigned tz = 0; tz < cfg.block.z; ++tz)
          for (unsigned ty = 0; ty < cfg.block.y; ++ty)
            for (unsigned tx = 0; tx < cfg.block.x; ++tx) {
              ix.block_idx = Dim3{bx, by, bz};
              ix.thread_idx = Dim3{tx, ty, tz};
              kernel(ix);
            }
}

}  // namespace ember::kernels
