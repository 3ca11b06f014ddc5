// The per-element math of the optimizer updates, once, as host/device functors: the CPU driver
// (core/kernels/cpu/optim.cpp) runs them in loops that vectorize, the CUDA multi-tensor launch
// (core/kernels/cuda/multi_tensor.cu, Note [Multi-tensor launches]) runs them per thread. Op order
// follows torch's _single_tensor_adam / _single_tensor_sgd, each step rounded to T as the
// separate tensor ops would round it.
#pragma once
#include <cmath>

#include "core/kernels/math.h"
#include "core/kernels/multi_tensor.h"
#include "core/macros.h"

namespace ember::kernels {

/// The hyper-parameters of one Adam/AdamW step (decoupled: AdamW's weight decay); step is the
/// step count after this step (1 for the first).
struct AdamArgs {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0, step = 1.0;
  bool maximize = false, decoupled = false;
};

struct SgdArgs {
  double lr = 0.01, momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false, maximize = false;
};

/// Adam/AdamW for one element. The branches that would stop vectorization are template
/// parameters (coupled weight decay, AMSGrad) or exact multiplications (maximize: g * -1; no
/// decoupled decay: p * 1).
template <typename T, bool kCoupledDecay, bool kAmsgrad>
struct AdamStepF {
  T neg_step_size, bc2_sqrt, b1, b2, one_minus_b1, one_minus_b2, wd, eps, decay, sign;
  EMBER_HOST_DEVICE EMBER_FORCE_INLINE void operator()(T& p, T g, T& m, T& v, T& vmax) const {
    T gi = g * sign;
    const T pi = p * decay;
    if constexpr (kCoupledDecay) gi = gi + wd * pi;
    T mi = m * b1;
    mi = mi + one_minus_b1 * gi;
    T vi = v * b2;
    vi = vi + one_minus_b2 * (gi * gi);
    m = mi;
    v = vi;
    T den_src = vi;
    if constexpr (kAmsgrad) {
      den_src = vmax > vi ? vmax : vi;
      vmax = den_src;
    }
    const T denom = k_sqrt(den_src) / bc2_sqrt + eps;
    p = pi + neg_step_size * (mi / denom);
  }
};

/// The per-step scalars of Adam that depend on the step count: -lr / (1 - beta1^step) and
/// sqrt(1 - beta2^step), in double (each path casts them to T).
struct AdamStepTerms {
  double neg_step_size, bc2_sqrt;
};
inline AdamStepTerms adam_step_terms(const AdamArgs& a, double step) {
  const double bc1 = 1.0 - std::pow(a.beta1, step);
  const double bc2 = 1.0 - std::pow(a.beta2, step);
  return AdamStepTerms{-(a.lr / bc1), std::sqrt(bc2)};
}

/// The functor for one step of `a` (a.step's terms; the multi-tensor op replaces them per tensor).
template <typename T, bool kCoupledDecay, bool kAmsgrad>
AdamStepF<T, kCoupledDecay, kAmsgrad> make_adam_step(const AdamArgs& a) {
  const AdamStepTerms terms = adam_step_terms(a, a.step);
  AdamStepF<T, kCoupledDecay, kAmsgrad> f;
  f.neg_step_size = static_cast<T>(terms.neg_step_size);
  f.bc2_sqrt = static_cast<T>(terms.bc2_sqrt);
  f.b1 = static_cast<T>(a.beta1);
  f.b2 = static_cast<T>(a.beta2);
  f.one_minus_b1 = static_cast<T>(1.0 - a.beta1);
  f.one_minus_b2 = static_cast<T>(1.0 - a.beta2);
  f.wd = static_cast<T>(a.weight_decay);
  f.eps = static_cast<T>(a.eps);
  f.decay = a.decoupled && a.weight_decay != 0.0 ? static_cast<T>(1.0 - a.lr * a.weight_decay) : T(1);
  f.sign = a.maximize ? T(-1) : T(1);
  return f;
}

/// Adam over a multi-tensor launch: lists param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq (the
/// last only with kAmsgrad); entry.arg = adam_step_terms of that tensor's step.
template <typename T, bool kCoupledDecay, bool kAmsgrad>
struct AdamMultiF {
  AdamStepF<T, kCoupledDecay, kAmsgrad> f;
  EMBER_HOST_DEVICE EMBER_FORCE_INLINE void operator()(const MultiTensorEntry& e, int64_t i) const {
    AdamStepF<T, kCoupledDecay, kAmsgrad> g = f;
    g.neg_step_size = static_cast<T>(e.arg[0]);
    g.bc2_sqrt = static_cast<T>(e.arg[1]);
    T unused = T(0);
    T& vmax = kAmsgrad ? static_cast<T*>(e.ptr[4])[i] : unused;
    g(static_cast<T*>(e.ptr[0])[i], static_cast<const T*>(e.ptr[1])[i], static_cast<T*>(e.ptr[2])[i],
      static_cast<T*>(e.ptr[3])[i], vmax);
  }
};

/// SGD with momentum / dampening / Nesterov / weight decay for one element; `buf` is used when
/// has_buf (init_buf: the first step, which stores the gradient itself).
template <typename T>
struct SgdStepF {
  T wd, mom, one_minus_damp, neg_lr;
  bool maximize, has_wd, nesterov, has_buf, init_buf;
  EMBER_HOST_DEVICE EMBER_FORCE_INLINE void operator()(T& p, T g, T& buf) const {
    T d = maximize ? -g : g;
    if (has_wd) d = d + wd * p;
    if (has_buf) {
      const T bv = init_buf ? d : buf * mom + one_minus_damp * d;
      buf = bv;
      d = nesterov ? d + mom * bv : bv;
    }
    p = p + neg_lr * d;
  }
};

/// The functor for `a`; has_buf: a momentum buffer is used; init_buf: its first step.
template <typename T>
SgdStepF<T> make_sgd_step(const SgdArgs& a, bool has_buf, bool init_buf) {
  SgdStepF<T> f;
  f.wd = static_cast<T>(a.weight_decay);
  f.mom = static_cast<T>(a.momentum);
  f.one_minus_damp = static_cast<T>(1.0 - a.dampening);
  f.neg_lr = static_cast<T>(-a.lr);
  f.maximize = a.maximize;
  f.has_wd = a.weight_decay != 0.0;
  f.nesterov = a.nesterov;
  f.has_buf = has_buf;
  f.init_buf = init_buf;
  return f;
}

/// SGD over a multi-tensor launch: lists param, grad, momentum_buffer (null without momentum);
/// entry.arg[0] != 0: that tensor's buffer takes its first step.
template <typename T>
struct SgdMultiF {
  SgdStepF<T> f;
  EMBER_HOST_DEVICE EMBER_FORCE_INLINE void operator()(const MultiTensorEntry& e, int64_t i) const {
    SgdStepF<T> g = f;
    g.init_buf = e.arg[0] != 0.0;
    T unused = T(0);
    T& buf = f.has_buf ? static_cast<T*>(e.ptr[2])[i] : unused;
    g(static_cast<T*>(e.ptr[0])[i], static_cast<const T*>(e.ptr[1])[i], buf);
  }
};

}  // namespace ember::kernels
