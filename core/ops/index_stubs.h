// The dispatch stubs of the indexing ops (core/ops/index.cpp; Note [Dispatch stubs]): index_select,
// gather, scatter_add_, index_add_, one_hot and the bounds check they all run first (embedding's
// too). Kernels: core/kernels/cpu/index.cpp and core/kernels/cuda/index.cu, both over the
// functors of core/kernels/index.h.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/kernels/index.h"
#include "core/ops/detail/dispatch_stub.h"

namespace ember::native {

/// The first i < n with idx[i] outside [-size, size) (allow_negative) or [0, size), or -1.
/// `slot`: 8 bytes of scratch memory on the device. Waits for the device (it reads the answer).
using IndexFirstOutOfRangeFn = int64_t(const int64_t* idx, int64_t n, int64_t size, bool allow_negative, void* slot,
                                       int device_index);
/// out[plain] = in[indexed] over the geometry (gather, index_select); any dtype; indices checked.
using IndexGatherFn = void(DType dtype, const kernels::IndexGeometry& g, const int64_t* idx, const void* in,
                           void* out, int device_index);
/// self[indexed] += src[plain] (scatter_add_, index_add_: `op` names it in errors and alerts);
/// float32/64, int32/64, bfloat16, float16; indices checked.
using IndexScatterAddFn = void(DType dtype, const kernels::IndexGeometry& g, const int64_t* idx, const void* src,
                               void* self, const char* op, int device_index);
/// out[i * num_classes + idx[i]] = 1 on a zeroed int64 output; indices checked.
using OneHotFn = void(const int64_t* idx, int64_t n, int64_t num_classes, int64_t* out, int device_index);

extern detail::DispatchStub<IndexFirstOutOfRangeFn> index_first_out_of_range_stub;
extern detail::DispatchStub<IndexGatherFn> index_gather_stub;
extern detail::DispatchStub<IndexScatterAddFn> index_scatter_add_stub;
extern detail::DispatchStub<OneHotFn> one_hot_stub;

}  // namespace ember::native
