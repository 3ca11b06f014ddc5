// The dispatch stub of the reductions (core/ops/reduce.cpp; Note [Dispatch stubs]). Kernels:
// core/kernels/cpu/reduce.cpp and core/kernels/cuda/reduce.cu, both stepping kernels::Reducer
// (core/kernels/reduce.h) with the same accumulator types.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/kernels/reduce.h"
#include "core/ops/detail/dispatch_stub.h"

namespace ember::native {

/// out[o] = scale * reduce(in) over plan's reduced dims, for o < plan.out_numel; out_idx (may be
/// null) gets arg indices for Max/Min/ArgMax/ArgMin; out may be null when only indices are
/// wanted. in/out are element pointers on the stub's device (cuda:device_index); 16-bit floats
/// reach only the CUDA kernel (Note [16-bit floats on CPU]).
using ReduceFn = void(kernels::ReduceKind op, DType in_dtype, DType out_dtype, const kernels::ReducePlan& plan,
                      const void* in, void* out, int64_t* out_idx, double scale, int device_index, const char* name);

extern detail::DispatchStub<ReduceFn> reduce_stub;

}  // namespace ember::native
