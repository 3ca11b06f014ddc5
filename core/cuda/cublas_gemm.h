// Row-major GEMM on CUDA through cuBLAS, with one lazily created cuBLAS handle per device.
// Handles live for the whole process (destroying them at exit races the CUDA runtime's own
// teardown). Thread-safe: each device's handle is used under that device's mutex.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace ember::cuda {

/// Row-major C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C on device `device_index`, for
/// float32 and float64; lda/ldb/ldc are row strides in elements. Runs on the calling thread's
/// current stream of that device (Note [Current stream]). Throws TypeError for other dtypes, Error when a size exceeds cuBLAS's int range.
void gemm(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void* a,
          int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc, int device_index);

}  // namespace ember::cuda
