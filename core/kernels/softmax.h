// softmax / log_softmax forward and backward, once, as per-line functors: line l of a contiguous
// tensor viewed as [outer, n, inner] is elements base + j * inner, j < n, with base =
// (l / inner) * n * inner + l % inner. The CUDA kernel (core/kernels/cuda/softmax.cu) runs them
// one thread per line through ElementKernel (Note [Kernels as launch-grid functors]); the CPU
// kernel (core/kernels/cpu/softmax.cpp) runs them over lines with the thread pool for float64
// and for float32 lines along a non-innermost dim, and is checked against them where it runs
// its vectorized float32 rows instead. Sums here are in double. Host/device.
#pragma once
#include <cstdint>
#include <math.h>

#include "core/kernels/loops.h"
#include "core/macros.h"

namespace ember::kernels {

EMBER_HOST_DEVICE inline double softmax_exp(double x) { return ::exp(x); }
EMBER_HOST_DEVICE inline double softmax_log(double x) { return ::log(x); }

/// out = softmax(in) or log_softmax(in) along each line (max-subtracted).
template <typename T>
struct SoftmaxLineF {
  LineGeometry g;
  bool log;
  const T* in;
  T* out;
  EMBER_HOST_DEVICE void operator()(int64_t line) const {
    const int64_t b = g.base(line), s = g.inner, n = g.n;
    T mx = -static_cast<T>(INFINITY);
    for (int64_t j = 0; j < n; ++j) {
      const T x = in[b + j * s];
      mx = mx < x ? x : mx;
    }
    if (mx == -static_cast<T>(INFINITY)) mx = 0;  // an all -inf line: exp(-inf - 0) = 0, no NaN from inf - inf
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += softmax_exp(static_cast<double>(in[b + j * s] - mx));
    if (log) {
      const T lse = static_cast<T>(softmax_log(sum)) + mx;
      for (int64_t j = 0; j < n; ++j) out[b + j * s] = in[b + j * s] - lse;
    } else {
      const double inv = 1.0 / sum;
      for (int64_t j = 0; j < n; ++j)
        out[b + j * s] = static_cast<T>(softmax_exp(static_cast<double>(in[b + j * s] - mx)) * inv);
    }
  }
};

/// grad_in from grad (of the output) and the forward output y, along each line:
/// softmax: y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g).
template <typename T>
struct SoftmaxBackwardLineF {
  LineGeometry g;
  bool log;
  const T* grad;
  const T* y;
  T* grad_in;
  EMBER_HOST_DEVICE void operator()(int64_t line) const {
    const int64_t b = g.base(line), s = g.inner, n = g.n;
    double sum = 0;
    if (log) {
      for (int64_t j = 0; j < n; ++j) sum += grad[b + j * s];
      for (int64_t j = 0; j < n; ++j) {
        const int64_t k = b + j * s;
        grad_in[k] = static_cast<T>(grad[k] - softmax_exp(static_cast<double>(y[k])) * sum);
      }
    } else {
      for (int64_t j = 0; j < n; ++j) sum += static_cast<double>(grad[b + j * s]) * y[b + j * s];
      for (int64_t j = 0; j < n; ++j) {
        const int64_t k = b + j * s;
        grad_in[k] = static_cast<T>(y[k] * (grad[k] - sum));
      }
    }
  }
};

}  // namespace ember::kernels
