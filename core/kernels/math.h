// Scalar math overloads usable in host and device code (device code cannot call std::exp).
#pragma once
#include <math.h>

#include <cstdint>

#include "core/macros.h"

namespace ember::kernels {

EMBER_HOST_DEVICE inline float k_exp(float x) { return ::expf(x); }
EMBER_HOST_DEVICE inline double k_exp(double x) { return ::exp(x); }
EMBER_HOST_DEVICE inline float k_log(float x) { return ::logf(x); }
EMBER_HOST_DEVICE inline double k_log(double x) { return ::log(x); }
EMBER_HOST_DEVICE inline float k_log1p(float x) { return ::log1pf(x); }
EMBER_HOST_DEVICE inline double k_log1p(double x) { return ::log1p(x); }
EMBER_HOST_DEVICE inline float k_sqrt(float x) { return ::sqrtf(x); }
EMBER_HOST_DEVICE inline double k_sqrt(double x) { return ::sqrt(x); }
EMBER_HOST_DEVICE inline float k_tanh(float x) { return ::tanhf(x); }
EMBER_HOST_DEVICE inline double k_tanh(double x) { return ::tanh(x); }
EMBER_HOST_DEVICE inline float k_sin(float x) { return ::sinf(x); }
EMBER_HOST_DEVICE inline double k_sin(double x) { return ::sin(x); }
EMBER_HOST_DEVICE inline float k_cos(float x) { return ::cosf(x); }
EMBER_HOST_DEVICE inline double k_cos(double x) { return ::cos(x); }
EMBER_HOST_DEVICE inline float k_erf(float x) { return ::erff(x); }
EMBER_HOST_DEVICE inline double k_erf(double x) { return ::erf(x); }
EMBER_HOST_DEVICE inline float k_pow(float a, float b) { return ::powf(a, b); }
EMBER_HOST_DEVICE inline double k_pow(double a, double b) { return ::pow(a, b); }
EMBER_HOST_DEVICE inline int64_t k_pow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : (a == -1 ? (b % 2 ? -1 : 1) : 0);
  int64_t r = 1;
  while (b) { if (b & 1) r *= a; a *= a; b >>= 1; }
  return r;
}
EMBER_HOST_DEVICE inline int32_t k_pow(int32_t a, int32_t b) {
  return static_cast<int32_t>(k_pow(static_cast<int64_t>(a), static_cast<int64_t>(b)));
}

// Integral arguments go through double (only reached by formulas instantiated for all types).
#define EMBER_INT_MATH(fn) \
  template <typename T>   \
  EMBER_HOST_DEVICE inline T fn(T x) { return static_cast<T>(fn(static_cast<double>(x))); }
EMBER_INT_MATH(k_exp)
EMBER_INT_MATH(k_log)
EMBER_INT_MATH(k_log1p)
EMBER_INT_MATH(k_sqrt)
EMBER_INT_MATH(k_tanh)
EMBER_INT_MATH(k_sin)
EMBER_INT_MATH(k_cos)
EMBER_INT_MATH(k_erf)
#undef EMBER_INT_MATH

template <typename T>
EMBER_HOST_DEVICE inline bool k_isnan(T x) { return x != x; }

}  // namespace ember::kernels
