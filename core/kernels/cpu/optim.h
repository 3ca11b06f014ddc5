// CPU drivers of the optimizer updates (core/kernels/optim.h) over contiguous buffers of one
// dtype, split over the thread pool. Called by native::adam_update_ / sgd_update_.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace ember::kernels::cpu {

struct AdamArgs {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0, step = 1.0;
  bool maximize = false, decoupled = false;
};

/// vmax null: no AMSGrad.
void adam_step(DType dtype, void* p, const void* g, void* m, void* v, void* vmax, int64_t n, const AdamArgs& a);

struct SgdArgs {
  double lr = 0.01, momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false, maximize = false;
};

/// buf null: no momentum; init_buf: the buffer's first step.
void sgd_step(DType dtype, void* p, const void* g, void* buf, bool init_buf, int64_t n, const SgdArgs& a);

}  // namespace ember::kernels::cpu
