// CPU drivers of the optimizer updates (core/kernels/optim.h) over contiguous buffers of one
// dtype, split over the thread pool.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/kernels/multi_tensor.h"
#include "core/kernels/optim.h"

namespace ember::kernels::cpu {

/// The kernels of the multi-tensor stubs (core/ops/multi_tensor_stubs.h): one fused step per
/// entry (max_exp_avg_sq null: no AMSGrad; momentum buffer: has_buf), in entry order.
void multi_tensor_adam(DType dtype, const AdamArgs& a, const MultiTensorEntry* entries, int64_t n, int device_index);
void multi_tensor_sgd(DType dtype, const SgdArgs& a, bool has_buf, const MultiTensorEntry* entries, int64_t n,
                      int device_index);

}  // namespace ember::kernels::cpu
