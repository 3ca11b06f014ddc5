// The dispatch stubs of the nn layer ops (core/ops/nn_layers.cpp; Note [Dispatch stubs]):
// embedding, layer_norm and gather_rows. Kernels: core/kernels/cpu/{embedding,layer_norm,
// gather_rows}.cpp and core/kernels/cuda/nn_layers.cu (the functors of core/kernels/{embedding,
// layer_norm,gather_rows}.h). Pointers are memory of the stub's device.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/ops/detail/dispatch_stub.h"

namespace ember::native {

/// out row i (of cols elements) = src row index[i], or the element *fill where index[i] == -1;
/// any dtype; index: out_rows int64 entries in [-1, src rows); fill: one element of dtype.
using GatherRowsFn = void(DType dtype, const int64_t* index, int64_t out_rows, int64_t cols, const void* src,
                          const void* fill, void* out, int device_index);
/// out [n, dim] = rows idx (checked, contiguous int64) of w [num, dim] (contiguous); float32/64
/// on CPU, any dtype on CUDA (embedding_forward falls back to index_select where there is none).
using EmbeddingForwardFn = void(DType dtype, const int64_t* idx, int64_t n, int64_t dim, const void* w, void* out,
                                int device_index);
/// Scratch memory embedding_backward needs for n indices into num_weights rows (0: none).
using EmbeddingBackwardScratchBytesFn = size_t(int64_t n, int64_t num_weights, int device_index);
/// gw [num_weights, dim] (zeroed) gets the rows of g [n, dim] summed per index in position
/// order, deterministically (Note [Deterministic embedding backward] in core/kernels/
/// embedding.h); the padding_idx row (-1: none) is left alone. float32/64.
using EmbeddingBackwardFn = void(DType dtype, const int64_t* idx, int64_t n, int64_t num_weights, int64_t dim,
                                 int64_t padding_idx, const void* g, void* gw, void* scratch, size_t scratch_bytes,
                                 int device_index);
/// layer_norm over contiguous [M, N] rows (w, b may be null); mean/rstd [M] float64. float32/64.
using LayerNormForwardFn = void(DType dtype, const void* x, const void* w, const void* b, void* y, double* mean,
                                double* rstd, int64_t M, int64_t N, double eps, int device_index);
/// Any of gx, gw, gb may be null (not wanted).
using LayerNormBackwardFn = void(DType dtype, const void* g, const void* x, const void* w, const double* mean,
                                 const double* rstd, int64_t M, int64_t N, void* gx, void* gw, void* gb,
                                 int device_index);

extern detail::DispatchStub<GatherRowsFn> gather_rows_stub;
extern detail::DispatchStub<EmbeddingForwardFn> embedding_forward_stub;
extern detail::DispatchStub<EmbeddingBackwardScratchBytesFn> embedding_backward_scratch_bytes_stub;
extern detail::DispatchStub<EmbeddingBackwardFn> embedding_backward_stub;
extern detail::DispatchStub<LayerNormForwardFn> layer_norm_forward_stub;
extern detail::DispatchStub<LayerNormBackwardFn> layer_norm_backward_stub;

}  // namespace ember::native
