// The dispatch stubs of the class-index losses (core/ops/class_loss.cpp; Note [Dispatch stubs]).
// Kernels: core/kernels/cpu/class_loss.cpp and core/kernels/cuda/class_loss.cu over the row
// functors of core/kernels/class_loss.h; the target check runs kernels::TargetInRange on both.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/kernels/class_loss.h"
#include "core/ops/detail/dispatch_stub.h"

namespace ember::native {

/// The first of n rows whose target is neither in [0, num_classes) nor ignore_index, or -1.
/// `slot`: 8 bytes of scratch memory on the device. Waits for the device (it reads the answer).
using FirstBadTargetFn = int64_t(const int64_t* target, int64_t n, int64_t num_classes, int64_t ignore_index,
                                 void* slot, int device_index);
/// Per row of g (N * S rows): loss, lse (cross_entropy only; may be null for nll) and the row's
/// weight w[target] (0 where ignored). float32/64 input x; targets checked.
using ClassLossForwardFn = void(DType dtype, const kernels::ClassLossGeometry& g, bool from_logits, const void* x,
                                double* loss, double* lse, double* row_weight, int device_index);
/// gx (dtype, shape of x; zeroed by the caller for nll) from the forward's lse; g_elem (dtype,
/// per row) or g_scalar when null.
using ClassLossBackwardFn = void(DType dtype, const kernels::ClassLossGeometry& g, bool from_logits, const void* x,
                                 const double* lse, const void* g_elem, double g_scalar, void* gx, int device_index);

extern detail::DispatchStub<FirstBadTargetFn> first_bad_target_stub;
extern detail::DispatchStub<ClassLossForwardFn> class_loss_forward_stub;
extern detail::DispatchStub<ClassLossBackwardFn> class_loss_backward_stub;

}  // namespace ember::native
