#include "core/kernels/cpu/class_loss.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/kernels/cpu/isa.h"
#include "core/kernels/cpu/softmax_rows.h"
#include "core/kernels/cpu/vec_math.h"
#include "core/thread_pool.h"

namespace ember::kernels::cpu {
namespace {

// float32 rows of class dim contiguous (S == 1): the hot layout ([N, C] logits). Row maximum and
// sum of exponentials in float vector lanes (softmax_rows.h), the log-sum-exp, the loss and the
// reductions in double. Bodies for rows [nb, ne); the ISA variants are defined below.
template <int W>
EMBER_CPU_INLINE void ce_forward_rows(const float* x, const ClassLossRows& s, double* loss, double wc_sum, int64_t nb,
                                      int64_t ne) {
  const int64_t C = s.C;
  const bool has_w = s.weight != nullptr;
  const double ls = s.label_smoothing;
  for (int64_t n = nb; n < ne; ++n) {
    const size_t r = static_cast<size_t>(n);
    const int64_t t = s.target[r];
    if (t == s.ignore_index) {
      loss[r] = 0.0;
      s.lse[r] = 0.0;
      continue;
    }
    const float* row = x + n * C;
    const float m = row_max<W>(row, C);
    const double lse = static_cast<double>(m) + std::log(static_cast<double>(row_sum_exp<W>(row, nullptr, C, m)));
    s.lse[r] = lse;
    const double wt = has_w ? s.weight[static_cast<size_t>(t)] : 1.0;
    double l = (1.0 - ls) * wt * (lse - static_cast<double>(row[t]));
    if (ls > 0.0) {
      double wx = 0.0;
      for (int64_t k = 0; k < C; ++k) {
        wx += (has_w ? s.weight[static_cast<size_t>(k)] : 1.0) * static_cast<double>(row[k]);
      }
      l += ls / static_cast<double>(C) * (wc_sum * lse - wx);
    }
    loss[r] = l;
  }
}

template <int W>
EMBER_CPU_INLINE void ce_backward_rows(const float* x, const ClassLossRows& s, const float* g_elem, double g_scalar,
                                       float* gx, double wc_sum, const float* wf, int64_t nb, int64_t ne) {
  const int64_t C = s.C;
  const bool has_w = s.weight != nullptr;
  const double ls = s.label_smoothing;
  for (int64_t n = nb; n < ne; ++n) {
    const size_t r = static_cast<size_t>(n);
    const int64_t t = s.target[r];
    float* out = gx + n * C;
    if (t == s.ignore_index) {
      for (int64_t c = 0; c < C; ++c) out[c] = 0.0f;
      continue;
    }
    const double scale = g_elem ? static_cast<double>(g_elem[r]) : g_scalar;
    const double wt = has_w ? s.weight[static_cast<size_t>(t)] : 1.0;
    // d_c = scale * ((1 - ls) w[t] (p_c - [c == t]) + ls / C (W_C p_c - w_c))
    //     = coef * p_c - smooth * w_c, then the target's -scale (1 - ls) w[t].
    const double sa = scale * (1.0 - ls) * wt, sb = scale * ls / static_cast<double>(C);
    const float coef = static_cast<float>(sa + sb * wc_sum), smooth = static_cast<float>(sb);
    const float lse = static_cast<float>(s.lse[r]);
    const float* row = x + n * C;
    if (ls > 0.0 && has_w) {
      for (int64_t c = 0; c < C; ++c) out[c] = coef * exp_approx(row[c] - lse) - smooth * wf[c];
    } else if (ls > 0.0) {
      for (int64_t c = 0; c < C; ++c) out[c] = coef * exp_approx(row[c] - lse) - smooth;
    } else {
      for (int64_t c = 0; c < C; ++c) out[c] = coef * exp_approx(row[c] - lse);
    }
    out[t] -= static_cast<float>(sa);
  }
}

}  // namespace

EMBER_CPU_ISA_VARIANTS(void, ce_forward_rows_f32,
                       (const float* x, const ClassLossRows& s, double* loss, double wc_sum, int64_t nb, int64_t ne),
                       (x, s, loss, wc_sum, nb, ne), ce_forward_rows<kW>(x, s, loss, wc_sum, nb, ne))
EMBER_CPU_ISA_VARIANTS(void, ce_backward_rows_f32,
                       (const float* x, const ClassLossRows& s, const float* g_elem, double g_scalar, float* gx,
                        double wc_sum, const float* wf, int64_t nb, int64_t ne),
                       (x, s, g_elem, g_scalar, gx, wc_sum, wf, nb, ne),
                       ce_backward_rows<kW>(x, s, g_elem, g_scalar, gx, wc_sum, wf, nb, ne))

namespace {

constexpr int64_t kGrainElements = 16384;

void cross_entropy_forward_rows_f32(const float* x, ClassLossRows& s, double* loss, double wc_sum) {
  parallel_for(0, s.N, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(s.C, 1)),
               [&](int64_t nb, int64_t ne) { ce_forward_rows_f32(x, s, loss, wc_sum, nb, ne); });
}

void cross_entropy_backward_rows_f32(const float* x, const ClassLossRows& s, const float* g_elem, double g_scalar,
                                     float* gx, double wc_sum) {
  std::vector<float> wf(s.weight != nullptr ? static_cast<size_t>(s.C) : 0);
  for (size_t c = 0; c < wf.size(); ++c) wf[c] = static_cast<float>(s.weight[c]);
  parallel_for(0, s.N, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(s.C, 1)), [&](int64_t nb, int64_t ne) {
    ce_backward_rows_f32(x, s, g_elem, g_scalar, gx, wc_sum, wf.data(), nb, ne);
  });
}

// Forward for one row set: fills per-element losses, lse, and the total weight.
template <typename T>
void cross_entropy_forward_impl(const T* x, ClassLossRows& s, double* loss) {
  const int64_t N = s.N, C = s.C, S = s.S;
  const bool has_w = s.weight != nullptr;
  double wc_sum = 0.0;
  for (int64_t c = 0; c < C; ++c) wc_sum += has_w ? s.weight[static_cast<size_t>(c)] : 1.0;
  if constexpr (std::is_same_v<T, float>) {
    if (S == 1) return cross_entropy_forward_rows_f32(x, s, loss, wc_sum);
  }
  const double ls = s.label_smoothing;
  parallel_for(0, N, std::max<int64_t>(1, 4096 / std::max<int64_t>(C * S, 1)), [&](int64_t nb, int64_t ne) {
    for (int64_t n = nb; n < ne; ++n) {
      for (int64_t sp = 0; sp < S; ++sp) {
        const size_t r = static_cast<size_t>(n * S + sp);
        const int64_t t = s.target[r];
        if (t == s.ignore_index) {
          loss[r] = 0.0;
          s.lse[r] = 0.0;
          continue;
        }
        const T* row = x + n * C * S + sp;
        double m = -INFINITY;
        for (int64_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(row[c * S]));
        double se = 0.0;
        for (int64_t c = 0; c < C; ++c) se += std::exp(static_cast<double>(row[c * S]) - m);
        const double lse = m + std::log(se);
        s.lse[r] = lse;
        const double wt = has_w ? s.weight[static_cast<size_t>(t)] : 1.0;
        double l = (1.0 - ls) * wt * (lse - static_cast<double>(row[t * S]));
        if (ls > 0.0) {
          double wx = 0.0;
          for (int64_t c = 0; c < C; ++c) {
            wx += (has_w ? s.weight[static_cast<size_t>(c)] : 1.0) * static_cast<double>(row[c * S]);
          }
          l += ls / static_cast<double>(C) * (wc_sum * lse - wx);
        }
        loss[r] = l;
      }
    }
  });
}

template <typename T>
void cross_entropy_backward_impl(const T* x, const ClassLossRows& s, const T* g_elem, double g_scalar, T* gx) {
  const int64_t N = s.N, C = s.C, S = s.S;
  const bool has_w = s.weight != nullptr;
  double wc_sum = 0.0;
  for (int64_t c = 0; c < C; ++c) wc_sum += has_w ? s.weight[static_cast<size_t>(c)] : 1.0;
  if constexpr (std::is_same_v<T, float>) {
    if (S == 1) return cross_entropy_backward_rows_f32(x, s, g_elem, g_scalar, gx, wc_sum);
  }
  const double ls = s.label_smoothing;
  parallel_for(0, N, std::max<int64_t>(1, 4096 / std::max<int64_t>(C * S, 1)), [&](int64_t nb, int64_t ne) {
    for (int64_t n = nb; n < ne; ++n) {
      for (int64_t sp = 0; sp < S; ++sp) {
        const size_t r = static_cast<size_t>(n * S + sp);
        const int64_t t = s.target[r];
        T* out = gx + n * C * S + sp;
        if (t == s.ignore_index) {
          for (int64_t c = 0; c < C; ++c) out[c * S] = T(0);
          continue;
        }
        const double scale = g_elem ? static_cast<double>(g_elem[r]) : g_scalar;
        const T* row = x + n * C * S + sp;
        const double lse = s.lse[r];
        const double wt = has_w ? s.weight[static_cast<size_t>(t)] : 1.0;
        const double a = (1.0 - ls) * wt;
        const double b = ls / static_cast<double>(C);
        for (int64_t c = 0; c < C; ++c) {
          const double p = std::exp(static_cast<double>(row[c * S]) - lse);
          double d = a * (p - (c == t ? 1.0 : 0.0));
          if (ls > 0.0) d += b * (wc_sum * p - (has_w ? s.weight[static_cast<size_t>(c)] : 1.0));
          out[c * S] = static_cast<T>(scale * d);
        }
      }
    }
  });
}

template <typename T>
void nll_forward_impl(const T* x, const ClassLossRows& s, double* loss) {
  const int64_t N = s.N, C = s.C, S = s.S;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t sp = 0; sp < S; ++sp) {
      const size_t r = static_cast<size_t>(n * S + sp);
      const int64_t t = s.target[r];
      if (t == s.ignore_index) {
        loss[r] = 0.0;
        continue;
      }
      const double wt = s.weight == nullptr ? 1.0 : s.weight[static_cast<size_t>(t)];
      loss[r] = -wt * static_cast<double>(x[n * C * S + t * S + sp]);
    }
  }
}

template <typename T>
void nll_backward_impl(const ClassLossRows& s, const T* g_elem, double g_scalar, T* gx) {
  const int64_t N = s.N, C = s.C, S = s.S;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t sp = 0; sp < S; ++sp) {
      const size_t r = static_cast<size_t>(n * S + sp);
      const int64_t t = s.target[r];
      if (t == s.ignore_index) continue;
      const double wt = s.weight == nullptr ? 1.0 : s.weight[static_cast<size_t>(t)];
      const double scale = g_elem ? static_cast<double>(g_elem[r]) : g_scalar;
      gx[n * C * S + t * S + sp] = static_cast<T>(-wt * scale);
    }
  }
}

}  // namespace

void cross_entropy_forward(DType dtype, const void* x, ClassLossRows& s, double* loss) {
  if (dtype == kFloat32) return cross_entropy_forward_impl(static_cast<const float*>(x), s, loss);
  EMBER_INTERNAL_ASSERT(dtype == kFloat64, "cross_entropy_forward: dtype ", dtype);
  cross_entropy_forward_impl(static_cast<const double*>(x), s, loss);
}

void cross_entropy_backward(DType dtype, const void* x, const ClassLossRows& s, const void* g_elem, double g_scalar,
                            void* gx) {
  if (dtype == kFloat32) {
    return cross_entropy_backward_impl(static_cast<const float*>(x), s, static_cast<const float*>(g_elem), g_scalar,
                                       static_cast<float*>(gx));
  }
  EMBER_INTERNAL_ASSERT(dtype == kFloat64, "cross_entropy_backward: dtype ", dtype);
  cross_entropy_backward_impl(static_cast<const double*>(x), s, static_cast<const double*>(g_elem), g_scalar,
                              static_cast<double*>(gx));
}

void nll_forward(DType dtype, const void* x, const ClassLossRows& s, double* loss) {
  if (dtype == kFloat32) return nll_forward_impl(static_cast<const float*>(x), s, loss);
  EMBER_INTERNAL_ASSERT(dtype == kFloat64, "nll_forward: dtype ", dtype);
  nll_forward_impl(static_cast<const double*>(x), s, loss);
}

void nll_backward(DType dtype, const ClassLossRows& s, const void* g_elem, double g_scalar, void* gx) {
  if (dtype == kFloat32) {
    return nll_backward_impl(s, static_cast<const float*>(g_elem), g_scalar, static_cast<float*>(gx));
  }
  EMBER_INTERNAL_ASSERT(dtype == kFloat64, "nll_backward: dtype ", dtype);
  nll_backward_impl(s, static_cast<const double*>(g_elem), g_scalar, static_cast<double*>(gx));
}

}  // namespace ember::kernels::cpu
