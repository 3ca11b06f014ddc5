#include "nn/utils/clip_grad.h"

#include <cmath>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember::nn::utils {

namespace {
// The norm_type-norm of one gradient (sums accumulated in double).
double grad_norm(const Tensor& g, double p) {
  if (g.numel() == 0) return 0.0;
  Tensor a = native::abs(g);
  if (std::isinf(p)) return p > 0 ? native::amax(a).item() : native::amin(a).item();
  if (p == 2.0) return std::sqrt(native::sum(native::mul(a, a), {}, false, kFloat64).item());
  if (p == 1.0) return native::sum(a, {}, false, kFloat64).item();
  return std::pow(native::sum(native::pow(a, p), {}, false, kFloat64).item(), 1.0 / p);
}
}  // namespace

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
  double total = 0.0;
  if (std::isinf(norm_type)) {
    total = norm_type > 0 ? 0.0 : INFINITY;
    for (const auto& g : grads) {
      double n = grad_norm(g, norm_type);
      total = norm_type > 0 ? std::max(total, n) : std::min(total, n);
    }
  } else {
    double acc = 0.0;
    for (const auto& g : grads) acc += std::pow(grad_norm(g, norm_type), norm_type);
    total = std::pow(acc, 1.0 / norm_type);
  }
  if (error_if_nonfinite && !std::isfinite(total)) {
    EMBER_THROW(Error, "The total norm of order ", norm_type,
                " for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error "
                "and scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`");
  }
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0 || std::isnan(coef)) {
    for (auto& g : grads) native::mul_(g, coef);
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
