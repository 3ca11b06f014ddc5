#include "core/kernels/cpu/blas_gemm.h"

#include <cblas.h>

#include "core/error.h"

namespace ember::kernels::cpu {

void blas_gemm(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void* a,
               int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc, int /*device_index*/) {
  const auto ta = trans_a ? CblasTrans : CblasNoTrans;
  const auto tb = trans_b ? CblasTrans : CblasNoTrans;
  if (dtype == kFloat32) {
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                static_cast<float>(alpha), static_cast<const float*>(a), static_cast<int>(lda),
                static_cast<const float*>(b), static_cast<int>(ldb), static_cast<float>(beta), static_cast<float*>(c),
                static_cast<int>(ldc));
    return;
  }
  EMBER_CHECK_T(TypeError, dtype == kFloat64, "mm: expected float32 or float64 for BLAS, got ", dtype);
  cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha,
              static_cast<const double*>(a), static_cast<int>(lda), static_cast<const double*>(b),
              static_cast<int>(ldb), beta, static_cast<double*>(c), static_cast<int>(ldc));
}

}  // namespace ember::kernels::cpu
