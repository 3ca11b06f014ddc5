// The dispatch stub of cumsum (core/ops/cumsum.cpp; Note [Dispatch stubs]). Kernels:
// core/kernels/cpu/cumsum.cpp and core/kernels/cuda/cumsum.cu, over CumsumLineF
// (core/kernels/cumsum.h).
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/ops/detail/dispatch_stub.h"

namespace ember::native {

/// out = the running sum of `in` along n of a contiguous [outer, n, inner] tensor (reverse:
/// from the end); float32, float64 or int64; in and out on the stub's device, same dtype.
using CumsumFn = void(DType dtype, int64_t outer, int64_t n, int64_t inner, bool reverse, const void* in, void* out,
                      int device_index);

extern detail::DispatchStub<CumsumFn> cumsum_stub;

}  // namespace ember::native
