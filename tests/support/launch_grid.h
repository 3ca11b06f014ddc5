// Shared by the CPU grid-emulation tests (launch_grid_test, launch_grid_nn_test): the grids every
// launch-grid functor is run over (Note [Kernels as launch-grid functors], core/kernels/launch.h)
// and the call that emulates one launch. Header-only; tests only.
#pragma once
#include <cstdint>
#include <string>

#include "core/kernels/launch.h"

namespace ember::test_support {

/// Grids that cover the work in one pass, in several passes (grid-stride) and with one thread.
struct Grid {
  unsigned threads;
  int64_t max_blocks;
};
inline constexpr Grid kGrids[] = {{256, kernels::kMaxLaunchBlocks}, {32, 2}, {7, 3}, {1, 1}};

inline std::string grid_name(const Grid& g) {
  return "grid " + std::to_string(g.threads) + "x" + std::to_string(g.max_blocks);
}

/// f(i) for i in [0, n) through ElementKernel, emulating a 1-D launch of at most grid.max_blocks
/// blocks of grid.threads threads.
template <typename F>
void run_emulated(const F& f, int64_t n, const Grid& grid) {
  kernels::emulate_launch(kernels::launch_config_1d("test", n, grid.threads, grid.max_blocks),
                          kernels::element_kernel(f, n));
}

}  // namespace ember::test_support
