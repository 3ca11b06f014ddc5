// The dispatch stubs of the element-wise ops (core/ops/elementwise.cpp, copy.cpp; Note [Dispatch
// stubs]). Kernels: core/kernels/cpu/elementwise.cpp and core/kernels/cuda/elementwise.cu, two
// drivers of the functors of core/kernels/elementwise.h. Every kernel runs on the device of the
// plan's operands (plan.device_index) and throws TypeError for a dtype it does not support,
// naming `name`.
#pragma once
#include "core/dtype.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/loops.h"
#include "core/ops/detail/dispatch_stub.h"

namespace ember::native {

/// plan operand 0 = op(operand 1, operand 2) in `dtype` (bool output for comparisons).
using BinaryFn = void(kernels::BinaryOp op, double alpha, DType dtype, const kernels::ElementwisePlan& plan,
                      const char* name);
/// plan operand 0 = op(operand 1; a, b) in `dtype`.
using UnaryFn = void(kernels::UnaryOp op, double a, double b, DType dtype, const kernels::ElementwisePlan& plan,
                     const char* name);
/// where (out, cond, a, b), masked_fill_ (self, self, mask), addcmul_/addcdiv_ (self, self, a,
/// b), lerp_ (self, self, end); `value` is the op's scalar.
using TernaryFn = void(kernels::TernaryOp op, double value, DType dtype, const kernels::ElementwisePlan& plan,
                       const char* name);
/// plan operand 0 (dtype `to`) = operand 1 (dtype `from`), converted; one device.
using CastFn = void(DType to, DType from, const kernels::ElementwisePlan& plan);

extern detail::DispatchStub<BinaryFn> binary_stub;
extern detail::DispatchStub<UnaryFn> unary_stub;
extern detail::DispatchStub<TernaryFn> ternary_stub;
extern detail::DispatchStub<CastFn> cast_stub;

}  // namespace ember::native
