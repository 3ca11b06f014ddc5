// layer_norm over contiguous [M, N] rows, once, as host/device functors: per-row statistics and
// normalization (forward), the per-row input gradient, and the per-column weight/bias
// gradients. The CPU kernels (core/kernels/cpu/layer_norm.cpp) call the row functions per row
// with the thread pool; the CUDA path runs the functors one thread per row or column through
// ElementKernel (Note [Kernels as launch-grid functors], core/kernels/launch.h). Statistics
// and sums are in double on both, in the same order, so the devices agree to the last bit up
// to the device's own sqrt/division rounding. Host/device, no CUDA headers.
#pragma once
#include <cstdint>

#include "core/kernels/math.h"
#include "core/macros.h"

namespace ember::kernels {

/// The weight/bias gradients sum rows in fixed blocks of this many rows, then the blocks in
/// order: the CPU kernel's partition (independent of the thread count), which the CUDA
/// per-column functor reproduces.
constexpr int64_t kLayerNormBlockRows = 64;

/// Row i: mean, rstd = 1 / sqrt(var + eps) (biased variance, two passes), y = (x - mean) * rstd
/// * w + b (w, b may be null).
template <typename T>
struct LayerNormForwardRowF {
  const T* x;
  const T* w;
  const T* b;
  T* y;
  double* mean;
  double* rstd;
  int64_t N;
  double eps;
  EMBER_HOST_DEVICE void operator()(int64_t i) const {
    const T* xi = x + i * N;
    double s = 0.0;
    for (int64_t j = 0; j < N; ++j) s += static_cast<double>(xi[j]);
    const double mu = s / static_cast<double>(N);
    double v = 0.0;
    for (int64_t j = 0; j < N; ++j) {
      const double d = static_cast<double>(xi[j]) - mu;
      v += d * d;
    }
    const double r = 1.0 / k_sqrt(v / static_cast<double>(N) + eps);
    mean[i] = mu;
    rstd[i] = r;
    T* yi = y + i * N;
    for (int64_t j = 0; j < N; ++j) {
      double h = (static_cast<double>(xi[j]) - mu) * r;
      if (w) h *= static_cast<double>(w[j]);
      if (b) h += static_cast<double>(b[j]);
      yi[j] = static_cast<T>(h);
    }
  }
};

/// Row i of the input gradient: gx = rstd * (g*w - mean(g*w) - xhat * mean(g*w * xhat)).
template <typename T>
struct LayerNormBackwardRowF {
  const T* g;
  const T* x;
  const T* w;  // may be null
  const double* mean;
  const double* rstd;
  int64_t N;
  T* gx;
  EMBER_HOST_DEVICE void operator()(int64_t i) const {
    const T* gi = g + i * N;
    const T* xi = x + i * N;
    const double mu = mean[i], r = rstd[i];
    double a = 0.0, c = 0.0;
    for (int64_t j = 0; j < N; ++j) {
      const double gj = static_cast<double>(gi[j]) * (w ? static_cast<double>(w[j]) : 1.0);
      a += gj;
      c += gj * (static_cast<double>(xi[j]) - mu) * r;
    }
    a /= static_cast<double>(N);
    c /= static_cast<double>(N);
    T* gxi = gx + i * N;
    for (int64_t j = 0; j < N; ++j) {
      const double gj = static_cast<double>(gi[j]) * (w ? static_cast<double>(w[j]) : 1.0);
      const double h = (static_cast<double>(xi[j]) - mu) * r;
      gxi[j] = static_cast<T>(r * (gj - a - h * c));
    }
  }
};

/// Column j of the weight and bias gradients (either may be null): gw[j] = sum_i g[i, j] *
/// xhat[i, j], gb[j] = sum_i g[i, j], summed over blocks of kLayerNormBlockRows rows.
template <typename T>
struct LayerNormWeightColumnF {
  const T* g;
  const T* x;
  const double* mean;
  const double* rstd;
  int64_t M;
  int64_t N;
  T* gw;
  T* gb;
  EMBER_HOST_DEVICE void operator()(int64_t j) const {
    double sw = 0.0, sb = 0.0;
    for (int64_t r0 = 0; r0 < M; r0 += kLayerNormBlockRows) {
      const int64_t r1 = r0 + kLayerNormBlockRows < M ? r0 + kLayerNormBlockRows : M;
      double pw = 0.0, pb = 0.0;
      for (int64_t i = r0; i < r1; ++i) {
        const double gj = static_cast<double>(g[i * N + j]);
        pw += gj * (static_cast<double>(x[i * N + j]) - mean[i]) * rstd[i];
        pb += gj;
      }
      sw += pw;
      sb += pb;
    }
    if (gw) gw[j] = static_cast<T>(sw);
    if (gb) gb[j] = static_cast<T>(sb);
  }
};

}  // namespace ember::kernels
