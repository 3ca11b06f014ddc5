// A float32 right-hand matrix laid out once for many products with few rows: the recurrent
// step of an RNN layer multiplies the same W_hh by a handful of rows (the batch, fewer as
// packed sequences end) 2 x T times per layer. BLAS re-packs the whole weight on every call,
// a fixed cost of about 45 us for a 256 x 1024 matrix on this machine, so a step of 8 rows
// ran at 65 GFLOPS where the arithmetic alone runs at 220. AVX-512 and AVX2 kernels over one
// panel layout; see Note [Packed recurrent GEMM] in packed_gemm.cpp.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace ember::kernels::cpu {

class PackedRhs {
 public:
  /// Whether this CPU runs a packed kernel (AVX-512 or AVX2+FMA, per cpu_isa()) and
  /// EMBER_RNN_PACKED_GEMM is not 0. When false, callers use BLAS (native::addmm_out).
  static bool available();

  /// Packs the K x N matrix whose element (k, n) is b[k * row_stride + n * col_stride].
  PackedRhs(const float* b, int64_t K, int64_t N, int64_t row_stride, int64_t col_stride);

  /// c = (accumulate ? c : 0) + a x B, with a [m x K] (row stride lda, unit column stride)
  /// and c [m x N] (row stride ldc). Each row of c is summed in the same order whatever m is
  /// (and whichever of the two kernels runs), so splitting a batch (DataParallel, DDP) does
  /// not change a row's result by a bit. Splits the columns over the thread pool when the
  /// product is large enough.
  void multiply(int64_t m, const float* a, int64_t lda, float* c, int64_t ldc, bool accumulate) const;

  int64_t rows() const { return K_; }
  int64_t cols() const { return N_; }

 private:
  int64_t K_ = 0, N_ = 0;
  Tensor panels_;  // ceil(N / 32) panels of K x 32 floats, zero-padded past column N
};

}  // namespace ember::kernels::cpu
