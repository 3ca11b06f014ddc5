#include "core/kernels/cpu/layer_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/kernels/layer_norm.h"
#include "core/thread_pool.h"

namespace ember::kernels::cpu {
namespace {

template <typename T>
void layer_norm_forward_kernel(const T* x, const T* w, const T* b, T* y, double* mean, double* rstd, int64_t M,
                               int64_t N, double eps) {
  const LayerNormForwardRowF<T> row{x, w, b, y, mean, rstd, N, eps};
  parallel_for(0, M, std::max<int64_t>(1, 8192 / std::max<int64_t>(N, 1)), [&](int64_t rb, int64_t re) {
    for (int64_t i = rb; i < re; ++i) row(i);
  });
}

template <typename T>
void layer_norm_backward_kernel(const T* g, const T* x, const T* w, const double* mean, const double* rstd, int64_t M,
                                int64_t N, T* gx, T* gw, T* gb) {
  const int64_t nblocks = (M + kLayerNormBlockRows - 1) / kLayerNormBlockRows;
  const bool need_wb = gw || gb;
  const LayerNormBackwardRowF<T> gx_row{g, x, w, mean, rstd, N, gx};
  std::vector<double> pw(need_wb ? static_cast<size_t>(nblocks * N) : 0), pb(pw.size());
  parallel_for(0, nblocks, 1, [&](int64_t bb, int64_t be) {
    for (int64_t blk = bb; blk < be; ++blk) {
      double* bw = need_wb ? &pw[static_cast<size_t>(blk * N)] : nullptr;
      double* bbias = need_wb ? &pb[static_cast<size_t>(blk * N)] : nullptr;
      const int64_t r0 = blk * kLayerNormBlockRows, r1 = std::min(M, r0 + kLayerNormBlockRows);
      for (int64_t i = r0; i < r1; ++i) {
        const T* gi = g + i * N;
        const T* xi = x + i * N;
        const double mu = mean[i], r = rstd[i];
        if (need_wb) {
          for (int64_t j = 0; j < N; ++j) {
            double gj = static_cast<double>(gi[j]);
            bw[j] += gj * (static_cast<double>(xi[j]) - mu) * r;
            bbias[j] += gj;
          }
        }
        if (gx) gx_row(i);
      }
    }
  });
  if (!need_wb) return;
  for (int64_t j = 0; j < N; ++j) {
    double sw = 0.0, sb = 0.0;
    for (int64_t blk = 0; blk < nblocks; ++blk) {
      sw += pw[static_cast<size_t>(blk * N + j)];
      sb += pb[static_cast<size_t>(blk * N + j)];
    }
    if (gw) gw[j] = static_cast<T>(sw);
    if (gb) gb[j] = static_cast<T>(sb);
  }
}

}  // namespace

void layer_norm_forward(DType dtype, const void* x, const void* w, const void* b, void* y, double* mean, double* rstd,
                        int64_t M, int64_t N, double eps, int /*device_index*/) {
  if (dtype == kFloat32) {
    return layer_norm_forward_kernel<float>(static_cast<const float*>(x), static_cast<const float*>(w),
                                            static_cast<const float*>(b), static_cast<float*>(y), mean, rstd, M, N,
                                            eps);
  }
  EMBER_INTERNAL_ASSERT(dtype == kFloat64, "layer_norm_forward: dtype ", dtype);
  layer_norm_forward_kernel<double>(static_cast<const double*>(x), static_cast<const double*>(w),
                                    static_cast<const double*>(b), static_cast<double*>(y), mean, rstd, M, N, eps);
}

void layer_norm_backward(DType dtype, const void* g, const void* x, const void* w, const double* mean,
                         const double* rstd, int64_t M, int64_t N, void* gx, void* gw, void* gb,
                         int /*device_index*/) {
  if (dtype == kFloat32) {
    return layer_norm_backward_kernel<float>(static_cast<const float*>(g), static_cast<const float*>(x),
                                             static_cast<const float*>(w), mean, rstd, M, N, static_cast<float*>(gx),
                                             static_cast<float*>(gw), static_cast<float*>(gb));
  }
  EMBER_INTERNAL_ASSERT(dtype == kFloat64, "layer_norm_backward: dtype ", dtype);
  layer_norm_backward_kernel<double>(static_cast<const double*>(g), static_cast<const double*>(x),
                                     static_cast<const double*>(w), mean, rstd, M, N, static_cast<double*>(gx),
                                     static_cast<double*>(gw), static_cast<double*>(gb));
}

}  // namespace ember::kernels::cpu
