// The per-element math of the optimizer updates, once, as host/device functors: the CPU driver
// (core/kernels/cpu/optim.cpp) runs them in loops that vectorize, a CUDA kernel would run them
// per thread. Op order follows torch's _single_tensor_adam / _single_tensor_sgd, each step
// rounded to T as the separate tensor ops would round it.
#pragma once
#include "core/kernels/math.h"
#include "core/macros.h"

namespace ember::kernels {

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

}  // namespace ember::kernels
