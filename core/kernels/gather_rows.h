// The CUDA-path body of native::gather_rows (packing and unpacking sequences, permute_batch): one
// work item per output element, as a functor for ElementKernel (Note [Kernels as launch-grid
// functors], core/kernels/launch.h). The CPU path copies whole rows (core/kernels/cpu/
// gather_rows.cpp); both give out row i = src row index[i], or the fill row where index[i] is -1.
// Host/device, no CUDA headers.
#pragma once
#include <cstdint>

#include "core/macros.h"

namespace ember::kernels {

/// out[i] for i < out_rows * cols: src[index[row] * cols + col], or *fill where index[row] < 0.
/// index entries are in [-1, src rows) (built by the host, or checked indices); fill is one
/// element of T in device memory (the fill value converted as the CPU path converts it), read
/// only for an index of -1, so it may be null where there is none (embedding's forward).
template <typename T>
struct GatherRowsF {
  const int64_t* index;
  int64_t cols;
  const T* src;
  const T* fill;
  T* out;
  EMBER_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t row = i / cols, col = i - row * cols;
    const int64_t r = index[row];
    out[i] = r >= 0 ? src[r * cols + col] : *fill;
  }
};

}  // namespace ember::kernels
