// The autograd functions of the layer ops (core/ops/nn_layers.cpp): embedding and layer_norm
// (forward and backward each one fused native op) and gather_rows, the differentiable row
// permutation behind packing and unpacking sequences and reordering RNN states. nn::functional
// checks the arguments in PyTorch's words and calls these. Stateless and thread-safe; a
// recorded node is run by one engine thread at a time.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace ember::autograd::functions {

/// Rows of weight [num, dim] picked by integer `input` -> [*input, dim] (native::embedding_forward);
/// the row padding_idx (already wrapped; -1: none) receives no gradient.
Tensor embedding(const Tensor& input, const Tensor& weight, int64_t padding_idx);

/// input viewed as [M, N] rows normalized (native::layer_norm_forward), weight and bias of N
/// elements or undefined. Shapes are the caller's to check.
Tensor layer_norm(const Tensor& input, int64_t M, int64_t N, const Tensor& weight, const Tensor& bias, double eps);

/// out row i takes source row index[i], or the fill value where index[i] == -1. inverse is
/// its inverse (source row r goes to out row inverse[r], or nowhere when -1). A RowMap is
/// injective, so the gradient of a gather is the gather with the inverse map: no accumulation.
struct RowMap {
  std::vector<int64_t> index;
  std::vector<int64_t> inverse;
  /// Fills `inverse` (over `num_src_rows` rows) from `index`; internal error unless injective.
  /// OutOfMemoryError naming `op` when `num_src_rows` entries cannot exist in host memory.
  void compute_inverse(int64_t num_src_rows, const char* op);
};

/// Views src as [map->inverse.size(), C] and returns the rows map->index picks, shaped
/// `out_sizes` (numel = index.size() * C), copied by native::gather_rows. Differentiable in src.
Tensor gather_rows(const Tensor& src, const std::shared_ptr<const RowMap>& map, const IntList& out_sizes,
                   double fill = 0.0);

}  // namespace ember::autograd::functions
