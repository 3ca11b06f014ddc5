// Exact, order-independent sums of floating-point tensors through 64-bit fixed point, once, as
// host/device functors (Note [Fixed-point gradient sums]). The CPU driver is
// core/kernels/cpu/fixed_point.cpp; the CUDA driver, core/kernels/cuda/fixed_point.cu, launches
// the same per-element functors (launch_elements) and reduces FixedPointAbsF with CUB.
// Header-only, no CUDA headers; thread-safe (pure).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/macros.h"

namespace ember::kernels {

// Note [Fixed-point gradient sums]
// Floating-point addition is not associative, so a sum over shards whose grouping changes (one
// process summing 8 shards, 3 ranks holding 3 + 3 + 2, a ring all_reduce that starts at another
// rank) changes the bits. Integer addition is associative and, in two's complement, exact
// modulo 2^64. So each term x (a shard's gradient element) is first rounded, once and on its
// own, to an integer multiple of 2^-E:  q = nearbyint(x * 2^E)  (round half to even), and the
// q are summed as int64 in any order, on any rank, by any collective: the result is the same
// integer everywhere. It goes back to floating point once: (double(sum) * 2^-E) / divisor,
// rounded to the element type.
//  * E is one exponent per tensor, the same on every rank: from the largest |x| over every term
//    of the sum (a MAX all_reduce, small) and the number of terms n, fixed by the job (never by
//    the world size):  E = 62 - ceil(log2 n) - e,  where max|x| < 2^e (frexp). Then every
//    |q| <= 2^(62 - ceil(log2 n)), and n of them sum to at most 2^62 in magnitude: no overflow.
//  * Precision: the largest term keeps about 62 - ceil(log2 n) bits (float32 has 24), so a
//    term smaller than max|x| * 2^-(62 - ceil(log2 n)) rounds to zero; the sum is exact for
//    the rounded terms, and off from the exact real sum by at most n/2 units of 2^-E.
//  * NaN and Inf: a tensor whose terms hold one anywhere has max|x| = +Inf by definition
//    (FixedPointAbsF); the caller then writes NaN into that whole tensor (so a GradScaler or
//    clip_grad_norm_ sees a non-finite gradient, on every rank alike) instead of quantising.
//  * Powers of two: 2^E and 2^-E are applied by multiplying with a double when |E| <= 1000
//    (exact: the products stay normal) and with ldexp beyond (float64 gradients below 2^-900).

constexpr int kFixedPointBits = 62;
constexpr int kFixedPointMaxExponent = 1000;

/// ceil(log2(n)) for n >= 1.
EMBER_HOST_DEVICE inline int ceil_log2(int64_t n) {
  int t = 0;
  while (t < 62 && (int64_t{1} << t) < n) ++t;
  return t;
}

/// The exponent E of Note [Fixed-point gradient sums] for a sum of `num_terms` terms whose
/// largest magnitude is `max_abs` (finite, >= 0; 0 gives 0).
inline int fixed_point_exponent(double max_abs, int64_t num_terms) {
  if (!(max_abs > 0.0)) return 0;
  int e = 0;
  std::frexp(max_abs, &e);  // max_abs = m * 2^e, m in [0.5, 1): max_abs < 2^e
  return kFixedPointBits - ceil_log2(num_terms) - e;
}

/// nearbyint(x) in the default rounding mode (half to even) without a library call, so that CPU
/// loops over it vectorize: below 2^52, adding 2^52 to |x| leaves a sum whose unit is 1 (the
/// addition rounds |x| to an integer, half to even) and subtracting it again is exact; from
/// 2^52 on every double is an integer already. The sign is put back last (-0.0 stays -0.0).
/// Equal to nearbyint for every finite x (fixed_point_test checks ties and the ends).
EMBER_HOST_DEVICE inline double round_half_even(double x) {
  constexpr double k = 4503599627370496.0;  // 2^52
  const double a = fabs(x);
  const double r = a < k ? (a + k) - k : a;
  return copysign(r, x);
}

/// x * 2^e, exact while the result is a normal double.
struct Pow2Scale {
  int e = 0;
  double factor = 1.0;  // 2^e when |e| <= kFixedPointMaxExponent
  EMBER_HOST_DEVICE double operator()(double x) const {
    return (e <= kFixedPointMaxExponent && e >= -kFixedPointMaxExponent) ? x * factor : ldexp(x, e);
  }
};
inline Pow2Scale make_pow2_scale(int e) {
  Pow2Scale s;
  s.e = e;
  s.factor = (e <= kFixedPointMaxExponent && e >= -kFixedPointMaxExponent) ? std::ldexp(1.0, e) : 1.0;
  return s;
}

/// |x|, or +Inf for NaN and +/-Inf: the term of the MAX that picks E.
template <typename T>
struct FixedPointAbsF {
  EMBER_HOST_DEVICE double operator()(T x) const {
    const double v = static_cast<double>(x);
    if (!(v - v == 0.0)) return INFINITY;  // NaN or Inf
    return v < 0 ? -v : v;
  }
};

/// acc[i] += nearbyint(x[i] * 2^E), wrapping modulo 2^64 (exact within the bound of the Note).
template <typename T>
struct FixedPointAccumulateF {
  const T* x;
  int64_t* acc;
  Pow2Scale to_fixed;  // 2^E
  EMBER_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t q = static_cast<int64_t>(round_half_even(to_fixed(static_cast<double>(x[i]))));
    acc[i] = static_cast<int64_t>(static_cast<uint64_t>(acc[i]) + static_cast<uint64_t>(q));
  }
};

/// out[i] = T((double(acc[i]) * 2^-E) / divisor).
template <typename T>
struct FixedPointToFloatF {
  const int64_t* acc;
  T* out;
  Pow2Scale from_fixed;  // 2^-E
  double divisor;
  EMBER_HOST_DEVICE void operator()(int64_t i) const {
    out[i] = static_cast<T>(from_fixed(static_cast<double>(acc[i])) / divisor);
  }
};

}  // namespace ember::kernels
