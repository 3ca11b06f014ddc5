// CPU kernel of gemm_stub (core/ops/linalg_stubs.h): OpenBLAS's cblas_sgemm / cblas_dgemm.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace ember::kernels::cpu {

void blas_gemm(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void* a,
               int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc, int device_index);

}  // namespace ember::kernels::cpu
