// CPU kernels of the element-wise stubs (core/ops/elementwise_stubs.h): dtype dispatch onto the
// functors of core/kernels/elementwise.h, driven by cpu_kernel (core/kernels/cpu/loops.h).
// float32, float64, int64, int32 and bool; 16-bit floats are widened by the ops (Note [16-bit
// floats on CPU] in core/ops/elementwise.cpp). No op's formula lives here.
#pragma once
#include "core/dtype.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/loops.h"

namespace ember::kernels::cpu {

void binary_kernel(BinaryOp op, double alpha, DType dtype, const ElementwisePlan& plan, const char* name);
void unary_kernel(UnaryOp op, double a, double b, DType dtype, const ElementwisePlan& plan, const char* name);
void ternary_kernel(TernaryOp op, double value, DType dtype, const ElementwisePlan& plan, const char* name);
/// A dense same-dtype plan is one memcpy.
void cast_kernel(DType to, DType from, const ElementwisePlan& plan);

}  // namespace ember::kernels::cpu
