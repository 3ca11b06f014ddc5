// The dispatch stubs of softmax / log_softmax (core/ops/softmax.cpp; Note [Dispatch stubs]).
// Kernels: core/kernels/cpu/softmax.cpp and core/kernels/cuda/softmax.cu, both over the functors
// of core/kernels/softmax.h.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/ops/detail/dispatch_stub.h"

namespace ember::native {

/// y = softmax(x) (log: log_softmax) over contiguous x viewed as [outer, n, inner], along n.
/// float32/64; outer * n * inner > 0; x and y on the stub's device (cuda:device_index).
using SoftmaxFn = void(DType dtype, int64_t outer, int64_t n, int64_t inner, bool log, const void* x, void* y,
                       int device_index);
/// gx from the output y and its gradient g, in the layout of SoftmaxFn.
using SoftmaxBackwardFn = void(DType dtype, int64_t outer, int64_t n, int64_t inner, bool log, const void* g,
                               const void* y, void* gx, int device_index);

extern detail::DispatchStub<SoftmaxFn> softmax_stub;
extern detail::DispatchStub<SoftmaxBackwardFn> softmax_backward_stub;

}  // namespace ember::native
