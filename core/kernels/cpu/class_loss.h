// CPU kernels of the class-index losses (cross_entropy with its log_softmax fused, nll_loss):
// the stubs of core/ops/class_loss_stubs.h, over an input viewed as [N, C, S]. See Note
// [Class-index loss kernels] in core/ops/class_loss.cpp for the formulas and the summation order.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/kernels/class_loss.h"

namespace ember::kernels::cpu {

int64_t first_bad_target(const int64_t* target, int64_t n, int64_t num_classes, int64_t ignore_index, void* slot,
                         int device_index);
/// float32 rows with S == 1 run vectorized row bodies; every other case runs the row functors of
/// core/kernels/class_loss.h (CrossEntropyRowF, NllRowF and their backward), threaded over rows.
void class_loss_forward(DType dtype, const ClassLossGeometry& g, bool from_logits, const void* x, double* loss,
                        double* lse, double* row_weight, int device_index);
void class_loss_backward(DType dtype, const ClassLossGeometry& g, bool from_logits, const void* x, const double* lse,
                         const void* g_elem, double g_scalar, void* gx, int device_index);

}  // namespace ember::kernels::cpu
