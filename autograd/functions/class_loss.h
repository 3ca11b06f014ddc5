// The autograd function of the fused class-index losses (Note [Class-index loss kernels] in
// core/ops/class_loss.cpp): cross_entropy over logits and nll_loss over log-probabilities, the
// forward one native::class_loss_forward and the backward one native::class_loss_backward.
// nn::functional checks shapes and dtypes in PyTorch's words, decides when the fused path
// applies, and calls this. Stateless and thread-safe.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace ember::autograd::functions {

/// How a loss reduces its per-element values (PyTorch's reduction='none' | 'mean' | 'sum');
/// nn::functional::Reduction is this type.
enum class Reduction { None, Mean, Sum };

/// input [N, C, d...] or [C] (float32/float64), target class indices, weight [C] or undefined
/// (not requiring grad). from_logits: cross_entropy (with label_smoothing), else nll_loss.
/// Reduction::None returns the per-element losses shaped `out_sizes`; Mean is the weighted
/// mean over the targets not ignored. Differentiable in input.
Tensor class_loss(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                  Reduction reduction, double label_smoothing, bool from_logits, const IntList& out_sizes);

}  // namespace ember::autograd::functions
