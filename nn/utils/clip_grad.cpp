#include "nn/utils/clip_grad.h"

#include <cmath>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::nn::utils {

double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  NoGradGuard no_grad;
  // Each tensor once: a parameter listed twice (tied weights) has one gradient, counted once
  // and scaled once (Note [Shared parameters] in nn/module.cpp).
  std::vector<Tensor> grads;
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& p : parameters) {
    Tensor g = p.grad();
    if (g.defined() && seen.insert(p.impl()).second) grads.push_back(g);
  }
  if (grads.empty()) return 0.0;
  // One norm over all gradients (native::total_norm), then one scaling pass.
  const double total = native::total_norm(grads, norm_type);
  if (error_if_nonfinite && !std::isfinite(total)) {
    EMBER_THROW(Error, "The total norm of order ", norm_type,
                " for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error "
                "and scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`");
  }
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0 || std::isnan(coef)) {
    native::scale_all_(grads, coef);
  }
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  NoGradGuard no_grad;
  for (const auto& p : parameters) {
    Tensor g = p.grad();
    if (g.defined()) native::clamp_(g, -clip_value, clip_value);
  }
}

}  // namespace ember::nn::utils
