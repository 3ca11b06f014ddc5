// The dispatch stubs of the multi-tensor ops (core/ops/optim.cpp, core/ops/norm.cpp; Note
// [Dispatch stubs]): one call per (device, dtype) group of contiguous tensors, each a
// kernels::MultiTensorEntry (Note [Multi-tensor launches] in core/kernels/multi_tensor.h) whose
// pointers are memory of the stub's device. Kernels: core/kernels/cpu/{optim,norm}.cpp and
// core/kernels/cuda/multi_tensor.cu, over the functors of core/kernels/{optim,norm}.h.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/kernels/multi_tensor.h"
#include "core/kernels/optim.h"
#include "core/ops/detail/dispatch_stub.h"

namespace ember::native {

/// Adam/AdamW over entries of `dtype` (float32/64): lists param, grad, exp_avg, exp_avg_sq,
/// max_exp_avg_sq (AMSGrad only); entry.arg = adam_step_terms of the tensor's step (a.step is
/// not read).
using MultiTensorAdamFn = void(DType dtype, const kernels::AdamArgs& a, const kernels::MultiTensorEntry* entries,
                               int64_t n, int device_index);
/// SGD: lists param, grad, momentum buffer (has_buf); entry.arg[0] != 0: the buffer's first step.
using MultiTensorSgdFn = void(DType dtype, const kernels::SgdArgs& a, bool has_buf,
                              const kernels::MultiTensorEntry* entries, int64_t n, int device_index);
/// The reduction of kernels::NormTermF over list 0 (entry.is_f64 gives each tensor's dtype),
/// not finished (no root). Waits for the device (it reads the answer).
using MultiTensorNormFn = double(const kernels::MultiTensorEntry* entries, int64_t n, double p, int device_index);
/// list 0 *= scale (entry.is_f64 gives each tensor's dtype).
using MultiTensorScaleFn = void(const kernels::MultiTensorEntry* entries, int64_t n, double scale, int device_index);

extern detail::DispatchStub<MultiTensorAdamFn> multi_tensor_adam_stub;
extern detail::DispatchStub<MultiTensorSgdFn> multi_tensor_sgd_stub;
extern detail::DispatchStub<MultiTensorNormFn> multi_tensor_norm_stub;
extern detail::DispatchStub<MultiTensorScaleFn> multi_tensor_scale_stub;

}  // namespace ember::native
