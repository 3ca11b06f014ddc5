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
// sum of exponentials in float vector lanes (softmax_rows.h), then the log-sum-exp in double and
// the loss by the functors' cross_entropy_row_loss. Bodies for rows [nb, ne); the ISA variants
// are defined below.
template <int W>
EMBER_CPU_INLINE void ce_forward_rows(const float* x, const ClassLossGeometry& s, double* loss, double* lse_out,
                                      double* row_weight, int64_t nb, int64_t ne) {
  const int64_t C = s.C;
  for (int64_t r = nb; r < ne; ++r) {
    if (zero_ignored_row(s, r, loss, lse_out, row_weight)) continue;
    const int64_t t = s.target[r];
    const float* row = x + r * C;
    const float m = row_max<W>(row, C);
    const double lse = static_cast<double>(m) + std::log(static_cast<double>(row_sum_exp<W>(row, nullptr, C, m)));
    lse_out[r] = lse;
    row_weight[r] = s.w(t);
    loss[r] = cross_entropy_row_loss(s, row, t, lse);
  }
}

// Its backward, in float: d_c = scale * ((1 - ls) w[t] (p_c - [c == t]) + ls / C (W_C p_c - w_c))
// = coef * p_c - smooth * w_c, then the target's -scale (1 - ls) w[t].
template <int W>
EMBER_CPU_INLINE void ce_backward_rows(const float* x, const ClassLossGeometry& s, const double* lse_in,
                                       const float* g_elem, double g_scalar, float* gx, const float* wf, int64_t nb,
                                       int64_t ne) {
  const int64_t C = s.C;
  const double wc_sum = s.wc_sum;
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
    const double sa = scale * (1.0 - ls) * wt, sb = scale * ls / static_cast<double>(C);
    const float coef = static_cast<float>(sa + sb * wc_sum), smooth = static_cast<float>(sb);
    const float lse = static_cast<float>(lse_in[r]);
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
                       (const float* x, const ClassLossGeometry& s, double* loss, double* lse, double* row_weight,
                        int64_t nb, int64_t ne),
                       (x, s, loss, lse, row_weight, nb, ne), ce_forward_rows<kW>(x, s, loss, lse, row_weight, nb, ne))
EMBER_CPU_ISA_VARIANTS(void, ce_backward_rows_f32,
                       (const float* x, const ClassLossGeometry& s, const double* lse, const float* g_elem,
                        double g_scalar, float* gx, const float* wf, int64_t nb, int64_t ne),
                       (x, s, lse, g_elem, g_scalar, gx, wf, nb, ne),
                       ce_backward_rows<kW>(x, s, lse, g_elem, g_scalar, gx, wf, nb, ne))

namespace {

constexpr int64_t kGrainElements = 16384;

// Rows [0, n) of a row functor (core/kernels/class_loss.h), threaded; rows are independent.
template <typename F>
void for_each_row(int64_t n, int64_t row_elements, const F& f) {
  parallel_for(0, n, std::max<int64_t>(1, 4096 / std::max<int64_t>(row_elements, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) f(r);
  });
}

template <typename T>
void forward_typed(const ClassLossGeometry& g, bool from_logits, const T* x, double* loss, double* lse,
                   double* row_weight) {
  const int64_t rows = g.N * g.S;
  if (!from_logits) return for_each_row(rows, 1, NllRowF<T>{g, x, loss, row_weight});
  if constexpr (std::is_same_v<T, float>) {
    if (g.S == 1) {
      return parallel_for(0, g.N, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(g.C, 1)),
                          [&](int64_t nb, int64_t ne) { ce_forward_rows_f32(x, g, loss, lse, row_weight, nb, ne); });
    }
  }
  for_each_row(rows, g.C, CrossEntropyRowF<T>{g, x, loss, lse, row_weight});
}

template <typename T>
void backward_typed(const ClassLossGeometry& g, bool from_logits, const T* x, const double* lse, const T* g_elem,
                    double g_scalar, T* gx) {
  const int64_t rows = g.N * g.S;
  if (!from_logits) return for_each_row(rows, 1, NllBackwardRowF<T>{g, g_elem, g_scalar, gx});
  if constexpr (std::is_same_v<T, float>) {
    if (g.S == 1) {
      std::vector<float> wf(g.weight != nullptr ? static_cast<size_t>(g.C) : 0);
      for (size_t c = 0; c < wf.size(); ++c) wf[c] = static_cast<float>(g.weight[c]);
      return parallel_for(0, g.N, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(g.C, 1)),
                          [&](int64_t nb, int64_t ne) {
                            ce_backward_rows_f32(x, g, lse, g_elem, g_scalar, gx, wf.data(), nb, ne);
                          });
    }
  }
  for_each_row(rows, g.C, CrossEntropyBackwardRowF<T>{g, x, lse, g_elem, g_scalar, gx});
}

}  // namespace

int64_t first_bad_target(const int64_t* target, int64_t n, int64_t num_classes, int64_t ignore_index,
                         void* /*slot*/, int /*device_index*/) {
  const TargetInRange ok{target, num_classes, ignore_index};
  for (int64_t r = 0; r < n; ++r) {
    if (!ok(r)) return r;
  }
  return -1;
}

void class_loss_forward(DType dtype, const ClassLossGeometry& g, bool from_logits, const void* x, double* loss,
                        double* lse, double* row_weight, int /*device_index*/) {
  if (dtype == kFloat32) {
    return forward_typed(g, from_logits, static_cast<const float*>(x), loss, lse, row_weight);
  }
  EMBER_INTERNAL_ASSERT(dtype == kFloat64, "class_loss_forward: dtype ", dtype);
  forward_typed(g, from_logits, static_cast<const double*>(x), loss, lse, row_weight);
}

void class_loss_backward(DType dtype, const ClassLossGeometry& g, bool from_logits, const void* x, const double* lse,
                         const void* g_elem, double g_scalar, void* gx, int /*device_index*/) {
  if (dtype == kFloat32) {
    return backward_typed(g, from_logits, static_cast<const float*>(x), lse, static_cast<const float*>(g_elem),
                          g_scalar, static_cast<float*>(gx));
  }
  EMBER_INTERNAL_ASSERT(dtype == kFloat64, "class_loss_backward: dtype ", dtype);
  backward_typed(g, from_logits, static_cast<const double*>(x), lse, static_cast<const double*>(g_elem), g_scalar,
                 static_cast<double*>(gx));
}

}  // namespace ember::kernels::cpu
