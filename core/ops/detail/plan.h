// Helpers shared by core/ops/*.cpp: building element-wise plans, device checks, and the
// table through which ember_core_cuda provides its kernels (null when CUDA is not built).
#pragma once
#include <initializer_list>

#include "core/kernels/elementwise.h"
#include "core/kernels/loops.h"
#include "core/kernels/reduce.h"
#include "core/tensor.h"

namespace ember::native::detail {

/// Plan over out (operand 0) and inputs broadcast to out's shape; dims coalesced.
kernels::ElementwisePlan make_plan(const Tensor& out, std::initializer_list<const Tensor*> inputs);

/// Throws Error unless all tensors are on one device (names `op` and the devices).
void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors);

/// Kernels of the CUDA backend. Registered by ember_core_cuda (register_cuda_kernels()).
struct CudaKernels {
  void (*binary)(kernels::BinaryOp op, double alpha, DType dtype, const kernels::ElementwisePlan& plan);
  void (*unary)(kernels::UnaryOp op, double a, double b, DType dtype, const kernels::ElementwisePlan& plan);
  void (*ternary)(kernels::TernaryOp op, double value, DType dtype, const kernels::ElementwisePlan& plan);
  void (*cast)(DType to, DType from, const kernels::ElementwisePlan& plan);
  /// Copies bytes between any two devices (host<->device, device<->device).
  void (*copy_bytes)(void* dst, Device dst_device, const void* src, Device src_device, size_t num_bytes);
  /// Row-major C[m,n] = alpha * op(A) op(B) + beta * C for float/double, strides in elements.
  void (*gemm)(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
               const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc,
               int device_index);
  void (*synchronize)(int device_index);
  /// out[o] = scale * reduce(in) over plan's reduced dims, for o < plan.out_numel; out_idx (may be
  /// null) gets arg indices for Max/Min/ArgMax/ArgMin; out may be null when only indices are wanted.
  /// in/out are element pointers on cuda:device_index; the accumulator is the CPU path's.
  void (*reduce)(kernels::ReduceOp op, DType in_dtype, DType out_dtype, const kernels::ReducePlan& plan,
                 const void* in, void* out, int64_t* out_idx, double scale, int device_index);
};
CudaKernels* cuda_kernels();
void set_cuda_kernels(CudaKernels* kernels);
/// Throws a clear Error when a CUDA tensor reaches an op without CUDA kernels.
CudaKernels& require_cuda(const char* op);

}  // namespace ember::native::detail
