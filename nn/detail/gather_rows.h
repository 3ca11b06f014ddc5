// gather_rows: the differentiable row permutation behind packing and unpacking sequences and
// reordering RNN states (nn/utils/rnn.cpp, nn/rnn.cpp). A RowMap is injective, so the gradient
// of a gather is the gather with the inverse map; no accumulation and no atomics are needed.
// Rows are copied by native::gather_rows (core/ops/nn_native.h). Stateless and thread-safe.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace ember::nn::detail {

/// out row i takes source row index[i], or the fill value where index[i] == -1. inverse is
/// its inverse (source row r goes to out row inverse[r], or nowhere when -1).
struct RowMap {
  std::vector<int64_t> index;
  std::vector<int64_t> inverse;
  /// Fills `inverse` (over `num_src_rows` rows) from `index`; internal error unless injective.
  /// OutOfMemoryError naming `op` when `num_src_rows` entries cannot exist in host memory.
  void compute_inverse(int64_t num_src_rows, const char* op);
};

/// Views src as [map->inverse.size(), C] and returns the rows map->index picks, shaped
/// `out_sizes` (numel = index.size() * C). Differentiable in src.
Tensor gather_rows(const Tensor& src, const std::shared_ptr<const RowMap>& map, const IntList& out_sizes,
                   double fill = 0.0);

}  // namespace ember::nn::detail
