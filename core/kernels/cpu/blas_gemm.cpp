#include "core/kernels/cpu/blas_gemm.h"

#include <cblas.h>

#include <algorithm>

#include "core/deterministic.h"
#include "core/error.h"
#include "core/thread_pool.h"

// Note [Deterministic GEMM]
// OpenBLAS's product depends on its own thread count: with more threads it partitions the
// product and, for some shapes, takes other kernels, and elements of C come out different in
// their last bits (for example a linear layer's forward and weight gradient at a large batch,
// 1 thread against 2). Under
// use_deterministic_algorithms(true) OpenBLAS therefore runs single-threaded
// (detail::apply_blas_threads), and the intra-op pool supplies the parallelism instead: C is cut
// into tiles of a fixed size (kTileRows x kTileCols, never a number of pieces), each computed by
// one single-threaded call over the whole K. The tiles and every call's arguments are the same
// for any thread count, so the bits are; with one thread the tiles run one after another.

namespace ember::kernels::cpu {

namespace {
constexpr int64_t kTileRows = 1024, kTileCols = 2048;

void gemm_call(DType dtype, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, double alpha,
               const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc) {
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
}  // namespace

void blas_gemm(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void* a,
               int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc, int /*device_index*/) {
  const auto ta = trans_a ? CblasTrans : CblasNoTrans;
  const auto tb = trans_b ? CblasTrans : CblasNoTrans;
  if (!are_deterministic_algorithms_enabled() || (m <= kTileRows && n <= kTileCols)) {
    gemm_call(dtype, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Note [Deterministic GEMM]: fixed tiles of C on the intra-op pool.
  const size_t elem = dtype == kFloat64 ? 8 : 4;
  const int64_t row_tiles = (m + kTileRows - 1) / kTileRows, col_tiles = (n + kTileCols - 1) / kTileCols;
  const auto* ab = static_cast<const char*>(a);
  const auto* bb = static_cast<const char*>(b);
  auto* cb = static_cast<char*>(c);
  parallel_for(0, row_tiles * col_tiles, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i0 = (t / col_tiles) * kTileRows, j0 = (t % col_tiles) * kTileCols;
      const int64_t mi = std::min(kTileRows, m - i0), nj = std::min(kTileCols, n - j0);
      // Row i0 of op(A): A's row i0 (A is m x k) or A's column i0 (A is k x m); column j0 of
      // op(B): B's column j0 (B is k x n) or B's row j0 (B is n x k).
      const void* at = ab + static_cast<size_t>(trans_a ? i0 : i0 * lda) * elem;
      const void* bt = bb + static_cast<size_t>(trans_b ? j0 * ldb : j0) * elem;
      void* ct = cb + static_cast<size_t>(i0 * ldc + j0) * elem;
      gemm_call(dtype, ta, tb, mi, nj, k, alpha, at, lda, bt, ldb, beta, ct, ldc);
    }
  });
}

}  // namespace ember::kernels::cpu
