// CPU kernels of softmax / log_softmax and their backward over contiguous tensors viewed as
// [outer, n, inner] (the softmax dim in the middle): the stubs of core/ops/softmax_stubs.h.
// float32 with the dim innermost (inner == 1, the [rows, classes] case) runs vectorized rows
// (AVX-512 / AVX2 / SSE2 variants, isa.h) with exp_approx and sums in float vector lanes; every
// other case runs the line functors of core/kernels/softmax.h (SoftmaxLineF,
// SoftmaxBackwardLineF: libm exp, double sums), the ones the CUDA kernel runs. Threaded over
// rows or lines; a line's result does not depend on the thread count.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace ember::kernels::cpu {

/// y = softmax(x) (log: log_softmax) along the middle dimension. dtype float32 or float64. The
/// CPU kernel of native::softmax_stub (core/ops/softmax_stubs.h); device_index is not read.
void softmax_forward(DType dtype, int64_t outer, int64_t n, int64_t inner, bool log, const void* x, void* y,
                     int device_index);
/// gx from the output y and its gradient g: log: g - exp(y) * sum(g); else y * (g - sum(g * y)).
void softmax_backward(DType dtype, int64_t outer, int64_t n, int64_t inner, bool log, const void* g, const void* y,
                      void* gx, int device_index);

/// Rows [r0, r1) of a float32 [rows, C] matrix (the vectorized path, exposed for the fused
/// losses): the maximum and the sum of exp(x - max) of each row into max_out / sum_out.
void softmax_row_stats_f32(const float* x, int64_t C, int64_t r0, int64_t r1, float* max_out, float* sum_out);

}  // namespace ember::kernels::cpu
