// The CPU kernel of reduce_stub (core/ops/reduce_stubs.h): kernels::Reducer stepped over the plan,
// threaded over outputs; double accumulators for floating inputs, int64 for integral and bool.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/kernels/reduce.h"

namespace ember::kernels::cpu {

void reduce_kernel(ReduceKind op, DType in_dtype, DType out_dtype, const ReducePlan& plan, const void* in, void* out,
                   int64_t* out_idx, double scale, int device_index, const char* name);

}  // namespace ember::kernels::cpu
