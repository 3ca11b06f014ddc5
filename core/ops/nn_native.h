// ember::native ops behind nn's layers, losses, optimizers and clip_grad: the fused kernels nn
// used to run on raw pointers. Each checks its arguments, allocates, and dispatches on device
// (CPU kernels in core/kernels/cpu/; a device without a kernel yet is a NotImplementedError
// naming the op). No autograd: nn's nodes call these forward and backward. Thread-safe.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ember::native {

// ---- class-index losses (see Note [Class-index loss kernels] in core/ops/class_loss.cpp) ------

struct ClassLossForward {
  Tensor loss;               // [N * S] float64 per-element losses, 0 where the target is ignored
  Tensor lse;                // [N * S] float64 row log-sum-exp (cross_entropy only)
  double sum = 0.0;          // sum of `loss` in element order
  double total_weight = 0.0; // sum of w[target] over the elements not ignored
};

/// cross_entropy over logits (`from_logits`, log_softmax fused) or nll_loss over
/// log-probabilities. input [N, C, d...] or [C] (float32/float64), target int64/int32 of the
/// input's shape without C, weight [C] or undefined. IndexError for a target outside [0, C)
/// that is not ignore_index. Shapes are the caller's to check (nn::functional words the errors).
ClassLossForward class_loss_forward(const Tensor& input, const Tensor& target, const Tensor& weight,
                                    int64_t ignore_index, double label_smoothing, bool from_logits);
/// d loss / d input (shape input_sizes, dtype): grad_elem (the per-element loss gradient,
/// [N * S]) or, when undefined, grad_scalar for every element. cross_entropy reads the
/// forward's `logits` and `lse`; nll_loss reads neither (pass undefined tensors).
Tensor class_loss_backward(const IntList& input_sizes, DType dtype, const Tensor& logits, const Tensor& target,
                           const Tensor& weight, const Tensor& lse, const Tensor& grad_elem, double grad_scalar,
                           int64_t ignore_index, double label_smoothing, bool from_logits);

// ---- norms over many tensors (clip_grad_norm_) -------------------------------------------------

/// The norm_type-norm of all elements of all `tensors` together (inf: max |x|, -inf: min |x|),
/// in one pass over each tensor, accumulated in double. 0 for no elements.
double total_norm(const std::vector<Tensor>& tensors, double norm_type);
/// t *= scale for every tensor (one pass each; bumps their versions).
void scale_all_(const std::vector<Tensor>& tensors, double scale);

}  // namespace ember::native
