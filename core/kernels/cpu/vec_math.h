// The vector math of ember's CPU kernels, once: GCC vector types of W floats (W = 4, 8, 16 for
// SSE2, AVX2, AVX-512; see isa.h) and exp/sigmoid/tanh approximations written once for a
// scalar float or such a vector. Scalar loops calling the float overloads vectorize (the RNN
// cells); row kernels use the vector overloads directly (softmax, losses). Everything is
// always-inline so each ISA variant of a kernel gets its own code. Host only.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#define EMBER_CPU_INLINE [[gnu::always_inline]] inline

// Wide vectors cross no call boundary (everything here is always-inline), so GCC's note that
// passing them by value would change the ABI without AVX-512/AVX enabled does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace ember::kernels::cpu {

template <int W>
struct Vec {
  typedef float f __attribute__((vector_size(W * sizeof(float))));
  typedef int32_t i __attribute__((vector_size(W * sizeof(int32_t))));
};
template <int W>
using vfloat = typename Vec<W>::f;

// The int32 type of the same width as V (int32_t for a scalar float).
template <typename V>
struct IntOf {
  using type = decltype(V{} < V{});
};
template <>
struct IntOf<float> {
  using type = int32_t;
};
template <typename V>
using int_of_t = typename IntOf<V>::type;

template <typename V>
EMBER_CPU_INLINE V splat(float c) {
  return V{} + c;
}
template <typename V>
EMBER_CPU_INLINE V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename V>
EMBER_CPU_INLINE void store(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}
template <typename V>
EMBER_CPU_INLINE V vmax(V a, V b) {
  return a > b ? a : b;
}
template <int W>
EMBER_CPU_INLINE float hsum(vfloat<W> v) {
  float s = 0.0f;
  for (int i = 0; i < W; ++i) s += v[i];
  return s;
}
template <int W>
EMBER_CPU_INLINE float hmax(vfloat<W> v) {
  float m = v[0];
  for (int i = 1; i < W; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

// Note [Fast exp]
// exp for float: x = n ln2 + r with |r| <= ln2 / 2 (rounding by the 1.5 * 2^23 trick), Cephes'
// degree-6 polynomial for e^r, 2^n built in the exponent bits. About 1 ulp on [-87, 88]; x is
// clamped to 88 above and the result is 0 below -87.3 (where expf turns denormal), so -inf
// gives 0 and a softmax row's masked entries vanish. NaN in, NaN out. Every operation
// vectorizes: no libm call, no float-to-int conversion.
template <typename V>
EMBER_CPU_INLINE V exp_approx(V x) {
  using I = int_of_t<V>;
  const V magic = splat<V>(12582912.0f);
  const V underflow = x < splat<V>(-87.3365f) ? splat<V>(0.0f) : splat<V>(1.0f);
  V xc = x < splat<V>(-87.0f) ? splat<V>(-87.0f) : x;
  xc = xc > splat<V>(88.0f) ? splat<V>(88.0f) : xc;
  const V t = xc * 1.44269504088896341f + magic;
  const I n = std::bit_cast<I>(t) - std::bit_cast<I>(magic);
  const V nf = t - magic;
  V r = xc - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
  V p = splat<V>(1.9875691500E-4f);
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * r * r + r + 1.0f;
  return p * std::bit_cast<V>((n + 127) << 23) * underflow;
}

template <typename V>
EMBER_CPU_INLINE V sigmoid_approx(V x) {
  return 1.0f / (1.0f + exp_approx(-x));
}

// |x| < 0.625: Cephes' tanhf odd polynomial (no cancellation near 0); else 1 - 2/(e^2|x| + 1).
template <typename V>
EMBER_CPU_INLINE V tanh_approx(V x) {
  using I = int_of_t<V>;
  V ax;
  if constexpr (std::is_same_v<V, float>) {
    ax = std::fabs(x);
  } else {
    ax = std::bit_cast<V>(std::bit_cast<I>(x) & 0x7fffffff);
  }
  const V big = 1.0f - 2.0f / (exp_approx(2.0f * ax) + 1.0f);
  const V z = x * x;
  V s = splat<V>(-5.70498872745E-3f);
  s = s * z + 2.06390887954E-2f;
  s = s * z - 5.37397155531E-2f;
  s = s * z + 1.33314422036E-1f;
  s = s * z - 3.33332819422E-1f;
  s = s * z * ax + ax;
  const V mag = ax < 0.625f ? s : big;
  if constexpr (std::is_same_v<V, float>) {
    return std::copysign(mag, x);
  } else {
    return std::bit_cast<V>(std::bit_cast<I>(mag) | (std::bit_cast<I>(x) & static_cast<int32_t>(0x80000000u)));
  }
}

}  // namespace ember::kernels::cpu
