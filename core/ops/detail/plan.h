// Helpers shared by core/ops/*.cpp: building element-wise plans and device checks.
#pragma once
#include <initializer_list>

#include "core/kernels/elementwise.h"
#include "core/kernels/loops.h"
#include "core/tensor.h"

namespace ember::native::detail {

/// Plan over out (operand 0) and inputs broadcast to out's shape; dims coalesced.
kernels::ElementwisePlan make_plan(const Tensor& out, std::initializer_list<const Tensor*> inputs);

/// Throws Error unless all tensors are on one device (names `op` and the devices).
void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors);

}  // namespace ember::native::detail
