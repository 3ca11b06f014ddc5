// CPU kernels of the embedding lookup and its gradient (native::embedding_forward / _backward):
// row copies over the thread pool forward; backward sums rows serially in index order, so a
// repeated index's sum is the same on every run and thread count.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace ember::kernels::cpu {

/// out[i, :] = w[idx[i], :] for i < n (float32/float64, contiguous, indices checked).
void embedding_forward(DType dtype, const void* w, const int64_t* idx, int64_t n, int64_t dim, void* out);
/// gw[idx[i], :] += g[i, :] for i < n, skipping idx[i] == pad (gw zeroed by the caller).
void embedding_backward(DType dtype, const void* g, const int64_t* idx, int64_t n, int64_t dim, int64_t pad, void* gw);

}  // namespace ember::kernels::cpu
