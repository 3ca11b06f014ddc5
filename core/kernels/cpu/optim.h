// CPU drivers of the optimizer updates (core/kernels/optim.h) over contiguous buffers of one
// dtype, split over the thread pool. Called by native::adam_update_ / sgd_update_.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/kernels/optim.h"

namespace ember::kernels::cpu {

/// vmax null: no AMSGrad.
void adam_step(DType dtype, void* p, const void* g, void* m, void* v, void* vmax, int64_t n, const AdamArgs& a);

/// buf null: no momentum; init_buf: the buffer's first step.
void sgd_step(DType dtype, void* p, const void* g, void* buf, bool init_buf, int64_t n, const SgdArgs& a);

}  // namespace ember::kernels::cpu
