// CPU kernels of the embedding lookup and its gradient (native::embedding_forward / _backward):
// row copies over the thread pool forward; backward sums rows serially in index order, so a
// repeated index's sum is the same on every run and thread count.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace ember::kernels::cpu {

/// The kernels of the stubs of core/ops/nn_layers_stubs.h.
/// out[i, :] = w[idx[i], :] for i < n (any dtype, contiguous, indices checked).
void embedding_forward(DType dtype, const int64_t* idx, int64_t n, int64_t dim, const void* w, void* out,
                       int device_index);
/// 0: the serial backward needs no scratch.
size_t embedding_backward_scratch_bytes(int64_t n, int64_t num_weights, int device_index);
/// gw[idx[i], :] += g[i, :] for i < n, skipping idx[i] == padding_idx (gw zeroed by the caller).
/// float32/float64.
void embedding_backward(DType dtype, const int64_t* idx, int64_t n, int64_t num_weights, int64_t dim,
                        int64_t padding_idx, const void* g, void* gw, void* scratch, size_t scratch_bytes,
                        int device_index);

}  // namespace ember::kernels::cpu
