// The bodies of Embedding's backward on the GPU path (native::embedding_backward in
// core/ops/nn_layers.cpp), as per-element functors for ElementKernel (Note [Kernels as
// launch-grid functors], core/kernels/launch.h); the forward is GatherRowsF
// (core/kernels/gather_rows.h) with no fill row. Indices are a checked contiguous int64 tensor
// (every value in [0, num) before any launch). Host/device, no CUDA headers.
#pragma once
#include <cstdint>

#include "core/macros.h"

namespace ember::kernels {

/// pos[i] = i: the values the radix sort carries with the indices.
struct IotaF {
  int64_t* pos;
  EMBER_HOST_DEVICE void operator()(int64_t i) const { pos[i] = i; }
};

// Note [Deterministic embedding backward]
// The weight gradient sums the rows of grad that share an index. Atomics would make that sum's
// order (and so its float rounding) vary from run to run. Instead the indices are sorted with
// their positions (a stable radix sort: CUB's DeviceRadixSort on CUDA), so equal indices form a
// segment whose positions ascend; then item (i, c) of the sorted order, when i starts a segment,
// sums column c of grad over that segment in position order. That is the order of the CPU
// kernel (core/kernels/cpu/embedding.cpp, serial over indices), so both devices give the same
// bits: the row of index r is sum over positions p with idx[p] == r, ascending, starting at 0.

/// gw[key, c] = sum of g[pos[j], c] over the segment of equal keys that starts at sorted
/// position i (items that do not start a segment do nothing); the padding row stays as it is
/// (zero). keys: the sorted indices, pos: their positions, both [n]; gw zeroed [num, dim].
template <typename T>
struct EmbeddingBackwardSegmentF {
  const int64_t* keys;
  const int64_t* pos;
  int64_t n;
  int64_t dim;
  int64_t padding_idx;  // -1: none
  const T* g;
  T* gw;
  EMBER_HOST_DEVICE void operator()(int64_t e) const {
    const int64_t i = e / dim, c = e - i * dim;
    const int64_t key = keys[i];
    if ((i > 0 && keys[i - 1] == key) || key == padding_idx) return;
    T acc = gw[key * dim + c];
    for (int64_t j = i; j < n && keys[j] == key; ++j) acc += g[pos[j] * dim + c];
    gw[key * dim + c] = acc;
  }
};

}  // namespace ember::kernels
