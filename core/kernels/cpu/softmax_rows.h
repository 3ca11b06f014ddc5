// Vectorized pieces of a softmax row over W-float vectors (vec_math.h), shared by the softmax
// and fused-loss kernels: always-inline, so each ISA variant (isa.h) gets its own code.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/kernels/cpu/vec_math.h"

namespace ember::kernels::cpu {

// Max of a row; NaN entries are skipped here and propagate through exp later.
template <int W>
EMBER_CPU_INLINE float row_max(const float* x, int64_t C) {
  using V = vfloat<W>;
  V m0 = splat<V>(-INFINITY), m1 = m0;
  int64_t c = 0;
  for (; c + 2 * W <= C; c += 2 * W) {
    m0 = vmax(m0, load<V>(x + c));
    m1 = vmax(m1, load<V>(x + c + W));
  }
  for (; c + W <= C; c += W) m0 = vmax(m0, load<V>(x + c));
  float m = hmax<W>(vmax(m0, m1));
  for (; c < C; ++c) m = x[c] > m ? x[c] : m;
  return m;
}

// sum of exp(x - m); when y is not null also stores each exp(x - m) there.
template <int W>
EMBER_CPU_INLINE float row_sum_exp(const float* x, float* y, int64_t C, float m) {
  using V = vfloat<W>;
  const V mv = splat<V>(m);
  V s0 = splat<V>(0.0f), s1 = s0;
  int64_t c = 0;
  for (; c + 2 * W <= C; c += 2 * W) {
    const V e0 = exp_approx(load<V>(x + c) - mv), e1 = exp_approx(load<V>(x + c + W) - mv);
    if (y != nullptr) {
      store(y + c, e0);
      store(y + c + W, e1);
    }
    s0 += e0;
    s1 += e1;
  }
  for (; c + W <= C; c += W) {
    const V e0 = exp_approx(load<V>(x + c) - mv);
    if (y != nullptr) store(y + c, e0);
    s0 += e0;
  }
  float s = hsum<W>(s0 + s1);
  for (; c < C; ++c) {
    const float e = exp_approx(x[c] - m);
    if (y != nullptr) y[c] = e;
    s += e;
  }
  return s;
}

// A row of all -inf has max -inf; subtracting 0 instead gives exp terms of 0 and, as PyTorch,
// a NaN row.
EMBER_CPU_INLINE float safe_max(float m) { return std::isinf(m) && m < 0 ? 0.0f : m; }

}  // namespace ember::kernels::cpu
