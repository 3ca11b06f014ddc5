// Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_): rescales or clamps the
// .grad of the given parameters in place (parameters without a gradient are skipped). Run after
// backward and before optimizer.step(); not thread-safe with a concurrent backward.
#pragma once
#include <limits>
#include <vector>

#include "core/tensor.h"

namespace ember::nn::utils {

/// Scales all gradients by min(1, max_norm / (total_norm + 1e-6)), where total_norm is the
/// norm_type-norm of all gradients together (norm_type = infinity: the largest |g|). Returns
/// total_norm (0 when no parameter has a gradient). error_if_nonfinite: throws Error, scaling
/// nothing, when total_norm is NaN or infinite.
double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

/// Clamps every gradient element into [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace ember::nn::utils
