// The class-index losses (cross_entropy with log_softmax fused, nll_loss), once, as per-row
// functors for ElementKernel (Note [Kernels as launch-grid functors]): row r = n * S + s of an
// input viewed as [N, C, S]. Formulas and their double accumulation: Note [Class-index loss
// kernels] (core/ops/class_loss.cpp). The CUDA kernel runs every functor; the CPU kernel runs
// them too, except for float32 rows with S == 1, where it takes the log-sum-exp from float
// vector lanes and then calls cross_entropy_row_loss, and its backward is a float fast path
// checked against CrossEntropyBackwardRowF. Host/device; pointers are to one device's memory.
#pragma once
#include <cstdint>
#include <math.h>

#include "core/macros.h"

namespace ember::kernels {

struct ClassLossGeometry {
  int64_t N = 0, C = 0, S = 1;
  const int64_t* target = nullptr;  // [N * S], checked: in [0, C) or ignore_index
  const double* weight = nullptr;   // [C], or null for all ones
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  double wc_sum = 0.0;  // sum of the class weights (C without weights)

  EMBER_HOST_DEVICE int64_t base(int64_t r) const { return (r / S) * C * S + r % S; }  // x of class 0
  EMBER_HOST_DEVICE double w(int64_t c) const { return weight != nullptr ? weight[c] : 1.0; }
};

/// target[r] in [0, C) or ignore_index (the pre-launch check of class_loss_forward).
struct TargetInRange {
  const int64_t* target;
  int64_t C;
  int64_t ignore_index;
  EMBER_HOST_DEVICE bool operator()(int64_t r) const {
    const int64_t t = target[r];
    return t == ignore_index || (t >= 0 && t < C);
  }
};

/// Where row r's target is ignore_index: zeroes loss[r], lse[r] (unless lse is null) and
/// row_weight[r] and returns true.
EMBER_HOST_DEVICE inline bool zero_ignored_row(const ClassLossGeometry& g, int64_t r, double* loss, double* lse,
                                               double* row_weight) {
  if (g.target[r] != g.ignore_index) return false;
  loss[r] = 0.0;
  if (lse != nullptr) lse[r] = 0.0;
  row_weight[r] = 0.0;
  return true;
}

/// The cross-entropy loss of a kept row (class c at row[c * g.S]) with target t and
/// log-sum-exp l_se: (1 - ls) w[t] (l_se - x_t) + ls / C (W_C l_se - sum_c w_c x_c).
template <typename T>
EMBER_HOST_DEVICE double cross_entropy_row_loss(const ClassLossGeometry& g, const T* row, int64_t t, double l_se) {
  const int64_t S = g.S;
  const double ls = g.label_smoothing;
  double l = (1.0 - ls) * g.w(t) * (l_se - static_cast<double>(row[t * S]));
  if (ls > 0.0) {
    double wx = 0.0;
    for (int64_t c = 0; c < g.C; ++c) wx += g.w(c) * static_cast<double>(row[c * S]);
    l += ls / static_cast<double>(g.C) * (g.wc_sum * l_se - wx);
  }
  return l;
}

/// loss[r], lse[r] (cross_entropy) and row_weight[r] = w[target] (0 where ignored).
template <typename T>
struct CrossEntropyRowF {
  ClassLossGeometry g;
  const T* x;
  double* loss;
  double* lse;
  double* row_weight;
  EMBER_HOST_DEVICE void operator()(int64_t r) const {
    if (zero_ignored_row(g, r, loss, lse, row_weight)) return;
    const int64_t t = g.target[r];
    const T* row = x + g.base(r);
    const int64_t S = g.S;
    double m = -INFINITY;
    for (int64_t c = 0; c < g.C; ++c) {
      const double v = static_cast<double>(row[c * S]);
      m = m < v ? v : m;
    }
    double se = 0.0;
    for (int64_t c = 0; c < g.C; ++c) se += ::exp(static_cast<double>(row[c * S]) - m);
    const double l_se = m + ::log(se);
    lse[r] = l_se;
    loss[r] = cross_entropy_row_loss(g, row, t, l_se);
    row_weight[r] = g.w(t);
  }
};

/// gx[row r, every class] = scale_r * d loss_r / d x (0 for ignored rows); scale_r is g_elem[r]
/// or g_scalar when g_elem is null.
template <typename T>
struct CrossEntropyBackwardRowF {
  ClassLossGeometry g;
  const T* x;
  const double* lse;
  const T* g_elem;
  double g_scalar;
  T* gx;
  EMBER_HOST_DEVICE void operator()(int64_t r) const {
    const int64_t t = g.target[r], S = g.S;
    T* out = gx + g.base(r);
    if (t == g.ignore_index) {
      for (int64_t c = 0; c < g.C; ++c) out[c * S] = T(0);
      return;
    }
    const T* row = x + g.base(r);
    const double scale = g_elem != nullptr ? static_cast<double>(g_elem[r]) : g_scalar;
    const double ls = g.label_smoothing;
    const double a = (1.0 - ls) * g.w(t);
    const double b = ls / static_cast<double>(g.C);
    for (int64_t c = 0; c < g.C; ++c) {
      const double p = ::exp(static_cast<double>(row[c * S]) - lse[r]);
      double d = a * (p - (c == t ? 1.0 : 0.0));
      if (ls > 0.0) d += b * (g.wc_sum * p - g.w(c));
      out[c * S] = static_cast<T>(scale * d);
    }
  }
};

/// nll_loss over log-probabilities: loss[r] = -w[t] * x[t], row_weight[r] = w[t].
template <typename T>
struct NllRowF {
  ClassLossGeometry g;
  const T* x;
  double* loss;
  double* row_weight;
  EMBER_HOST_DEVICE void operator()(int64_t r) const {
    if (zero_ignored_row(g, r, loss, nullptr, row_weight)) return;
    const int64_t t = g.target[r];
    loss[r] = -g.w(t) * static_cast<double>(x[g.base(r) + t * g.S]);
    row_weight[r] = g.w(t);
  }
};

/// The target entry of gx per row (gx zeroed by the caller).
template <typename T>
struct NllBackwardRowF {
  ClassLossGeometry g;
  const T* g_elem;
  double g_scalar;
  T* gx;
  EMBER_HOST_DEVICE void operator()(int64_t r) const {
    const int64_t t = g.target[r];
    if (t == g.ignore_index) return;
    const double scale = g_elem != nullptr ? static_cast<double>(g_elem[r]) : g_scalar;
    gx[g.base(r) + t * g.S] = static_cast<T>(-g.w(t) * scale);
  }
};

}  // namespace ember::kernels
