// CPU kernels of native::total_norm and scale_all_: partial sums of |x|^p over fixed chunks of a tensor, so the
// summation order (and the result) does not depend on the thread count.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace ember::kernels::cpu {

/// Elements per partial sum.
constexpr int64_t kNormChunk = 65536;

/// For chunk i of the n elements of x (contiguous, float32/float64): out[i] = sum |x|^p
/// (p == inf: max |x|, p == -inf: min |x|). out has ceil(n / kNormChunk) entries.
void norm_partials(DType dtype, const void* x, int64_t n, double p, double* out);

/// x *= scale over n contiguous elements (float32/float64), split over the thread pool.
void scale_inplace(DType dtype, void* x, int64_t n, double scale);

}  // namespace ember::kernels::cpu
