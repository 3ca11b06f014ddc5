// Host entry points of the CUDA kernels in elementwise.cu and reduce.cu. Each launches on the
// calling thread's current device (set by the caller, see cuda_backend.cpp) on the legacy
// default stream and returns without waiting. Plain C++: included by g++-compiled files.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/loops.h"
#include "core/kernels/reduce.h"

namespace ember::cuda {

/// Every entry throws TypeError for a dtype the op does not support (as the CPU path does).
void launch_binary(kernels::BinaryOp op, double alpha, DType dtype, const kernels::ElementwisePlan& plan);
void launch_unary(kernels::UnaryOp op, double a, double b, DType dtype, const kernels::ElementwisePlan& plan);
void launch_ternary(kernels::TernaryOp op, double value, DType dtype, const kernels::ElementwisePlan& plan);
void launch_cast(DType to, DType from, const kernels::ElementwisePlan& plan);
/// out[o] = scale * reduce(in); out_idx (may be null) receives arg indices for Max/Min/ArgMax/ArgMin;
/// out may be null when only indices are wanted. in/out are element pointers on the current device.
void launch_reduce(kernels::ReduceOp op, DType in_dtype, DType out_dtype, const kernels::ReducePlan& plan,
                   const void* in, void* out, int64_t* out_idx, double scale);

}  // namespace ember::cuda
