// CPU kernels of the class-index losses (cross_entropy with its log_softmax fused, nll_loss)
// over an input viewed as [N, C, S]. See Note [Class-index loss kernels] in
// core/ops/class_loss.cpp for the formulas and the summation order. Called by that file only.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace ember::kernels::cpu {

struct ClassLossRows {
  int64_t N = 0, C = 0, S = 1;
  const int64_t* target = nullptr;  // [N * S], checked: in [0, C) or ignore_index
  const double* weight = nullptr;   // [C], or null for all ones
  double* lse = nullptr;            // [N * S]: written by cross_entropy_forward, read by its backward
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
};

/// loss[r] for each of the N * S elements (0 where ignored); also fills s.lse.
void cross_entropy_forward(DType dtype, const void* x, ClassLossRows& s, double* loss);
/// gx = d loss / d x scaled by g_elem[r] (per element, dtype of x) or g_scalar when g_elem is null.
void cross_entropy_backward(DType dtype, const void* x, const ClassLossRows& s, const void* g_elem, double g_scalar,
                            void* gx);
void nll_forward(DType dtype, const void* x, const ClassLossRows& s, double* loss);
/// Writes the target entries of gx only; the caller zeroes gx.
void nll_backward(DType dtype, const ClassLossRows& s, const void* g_elem, double g_scalar, void* gx);

}  // namespace ember::kernels::cpu
