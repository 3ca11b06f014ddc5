// The dispatch stub of the matrix product (core/ops/linalg.cpp; Note [Dispatch stubs]). Kernels:
// OpenBLAS on CPU (core/kernels/cpu/blas_gemm.cpp), cuBLAS on CUDA (core/cuda/cublas_gemm.cpp).
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/ops/detail/dispatch_stub.h"

namespace ember::native {

/// Row-major C[m,n] = alpha * op(A) op(B) + beta * C for float32/64; lda/ldb/ldc are row
/// strides in elements; pointers are memory of the stub's device.
using GemmFn = void(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                    const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc,
                    int device_index);

extern detail::DispatchStub<GemmFn> gemm_stub;

}  // namespace ember::native
