// adam_update_ / sgd_update_ (core/ops/nn_native.h): one parameter's optimizer step. Contiguous
// CPU tensors of one floating dtype run the fused kernel (core/kernels/cpu/optim.cpp); anything
// else (other devices, strided or mixed-dtype state) runs the same formula as native tensor ops
// in the same op order.
#include <cmath>

#include "core/kernels/cpu/optim.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::native {
namespace {

bool fusable_with(const Tensor& p, const Tensor& t) {
  return !t.defined() || (t.device() == p.device() && t.is_contiguous() && t.dtype() == p.dtype() &&
                          t.sizes() == p.sizes());
}

bool fusable(const Tensor& p, std::initializer_list<const Tensor*> others) {
  if (!(p.device().is_cpu() && p.is_contiguous() && (p.dtype() == kFloat32 || p.dtype() == kFloat64))) return false;
  for (const Tensor* t : others) {
    if (!fusable_with(p, *t)) return false;
  }
  return true;
}

void* data_or_null(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

}  // namespace

void adam_update_(Tensor& p, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, Tensor& max_exp_avg_sq,
                  double step, double lr, double beta1, double beta2, double eps, double weight_decay, bool maximize,
                  bool decoupled) {
  const bool amsgrad = max_exp_avg_sq.defined();
  if (fusable(p, {&grad, &exp_avg, &exp_avg_sq, &max_exp_avg_sq})) {
    kernels::cpu::AdamArgs a;
    a.lr = lr;
    a.beta1 = beta1;
    a.beta2 = beta2;
    a.eps = eps;
    a.weight_decay = weight_decay;
    a.step = step;
    a.maximize = maximize;
    a.decoupled = decoupled;
    kernels::cpu::adam_step(p.dtype(), p.raw_data(), grad.raw_data(), exp_avg.raw_data(), exp_avg_sq.raw_data(),
                            data_or_null(max_exp_avg_sq), p.numel(), a);
    p.bump_version();
    exp_avg.bump_version();
    exp_avg_sq.bump_version();
    if (amsgrad) max_exp_avg_sq.bump_version();
    return;
  }
  Tensor g = maximize ? neg(grad) : grad;
  if (weight_decay != 0.0) {
    if (decoupled) {
      mul_(p, 1.0 - lr * weight_decay);
    } else {
      g = add(g, p, weight_decay);
    }
  }
  mul_(exp_avg, beta1);
  add_(exp_avg, g, 1.0 - beta1);
  mul_(exp_avg_sq, beta2);
  addcmul_(exp_avg_sq, g, g, 1.0 - beta2);
  const double bc1 = 1.0 - std::pow(beta1, step);
  const double bc2 = 1.0 - std::pow(beta2, step);
  const double step_size = lr / bc1;
  const double bc2_sqrt = std::sqrt(bc2);
  Tensor denom;
  if (amsgrad) {
    copy_(max_exp_avg_sq, maximum(max_exp_avg_sq, exp_avg_sq));
    denom = div(sqrt(max_exp_avg_sq), bc2_sqrt);
  } else {
    denom = div(sqrt(exp_avg_sq), bc2_sqrt);
  }
  add_(denom, eps);
  addcdiv_(p, exp_avg, denom, -step_size);
}

void sgd_update_(Tensor& p, const Tensor& grad, Tensor& momentum_buffer, bool init_buffer, double lr, double momentum,
                 double dampening, double weight_decay, bool nesterov, bool maximize) {
  const bool use_buf = momentum_buffer.defined();
  if (fusable(p, {&grad, &momentum_buffer})) {
    kernels::cpu::SgdArgs a;
    a.lr = lr;
    a.momentum = momentum;
    a.dampening = dampening;
    a.weight_decay = weight_decay;
    a.nesterov = nesterov;
    a.maximize = maximize;
    kernels::cpu::sgd_step(p.dtype(), p.raw_data(), grad.raw_data(), data_or_null(momentum_buffer), init_buffer,
                           p.numel(), a);
    p.bump_version();
    if (use_buf) momentum_buffer.bump_version();
    return;
  }
  Tensor d = maximize ? neg(grad) : grad;
  if (weight_decay != 0.0) d = add(d, p, weight_decay);
  if (use_buf) {
    if (init_buffer) {
      copy_(momentum_buffer, d);
    } else {
      mul_(momentum_buffer, momentum);
      add_(momentum_buffer, d, 1.0 - dampening);
    }
    d = nesterov ? add(d, momentum_buffer, momentum) : momentum_buffer;
  }
  add_(p, d, -lr);
}

}  // namespace ember::native
