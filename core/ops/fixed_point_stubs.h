// The dispatch stubs of the exact fixed-point sums (core/ops/fixed_point.cpp; Note [Dispatch
// stubs]). Kernels: core/kernels/cpu/fixed_point.cpp and core/kernels/cuda/fixed_point.cu, over
// the functors of core/kernels/fixed_point.h (Note [Fixed-point gradient sums]). Every buffer is
// contiguous and on the stub's device; the dtype is float32 or float64.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/ops/detail/dispatch_stub.h"

namespace ember::native {

/// max |x[i]| over n elements, +Inf if any is NaN or Inf, 0 for n == 0; waits for the result.
using FixedPointMaxAbsFn = double(DType dtype, const void* x, int64_t n, int device_index);
/// acc[i] += nearbyint(x[i] * 2^exponent) for i < n (int64, wrapping).
using FixedPointAccumulateFn = void(DType dtype, const void* x, int64_t* acc, int64_t n, int exponent,
                                    int device_index);
/// out[i] = (acc[i] * 2^-exponent) / divisor, rounded to dtype.
using FixedPointToFloatFn = void(DType dtype, const int64_t* acc, void* out, int64_t n, int exponent, double divisor,
                                 int device_index);

extern detail::DispatchStub<FixedPointMaxAbsFn> fixed_point_max_abs_stub;
extern detail::DispatchStub<FixedPointAccumulateFn> fixed_point_accumulate_stub;
extern detail::DispatchStub<FixedPointToFloatFn> fixed_point_to_float_stub;

}  // namespace ember::native
