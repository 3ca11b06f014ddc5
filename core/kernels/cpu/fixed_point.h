// CPU drivers of the fixed-point sum functors (core/kernels/fixed_point.h, Note [Fixed-point
// gradient sums]) over contiguous buffers, split over the thread pool in pieces of a fixed
// size. Every element's result is independent of the split, so of the thread count. The kernels
// of core/ops/fixed_point_stubs.h (device_index names the CPU logical device; unused).
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace ember::kernels::cpu {

/// max |x[i]| over n elements (float32 or float64), +Inf if any is NaN or Inf; 0 for n == 0.
double fixed_point_max_abs(DType dtype, const void* x, int64_t n, int device_index);

/// acc[i] += nearbyint(x[i] * 2^exponent) for i < n.
void fixed_point_accumulate(DType dtype, const void* x, int64_t* acc, int64_t n, int exponent, int device_index);

/// out[i] = (acc[i] * 2^-exponent) / divisor, rounded to dtype.
void fixed_point_to_float(DType dtype, const int64_t* acc, void* out, int64_t n, int exponent, double divisor,
                          int device_index);

}  // namespace ember::kernels::cpu
