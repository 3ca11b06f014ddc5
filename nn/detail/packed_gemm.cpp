#include "nn/detail/packed_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/ops/factory.h"
#include "core/thread_pool.h"

// Note [Packed recurrent GEMM]
// B (K x N) is stored as ceil(N / 32) column panels; panel p holds columns [32p, 32p + 32)
// for every k, 32 consecutive floats per k (zero past column N). The kernel computes an
// MR x 32 block of c with 2 x MR AVX-512 accumulators: per k it loads the panel's two vectors
// once and broadcasts each of the MR rows' a[i][k] into two FMAs, so B is read from L1/L2 once
// per MR rows and never re-packed. K runs in slices of 256 (a 32 KiB slice of the panel stays
// in L1 across all row blocks; each slice after the first adds onto c). MR is 8 (fewer for
// the last rows of m); every row's sum runs over k in ascending order, slice by slice, in one
// accumulator per 16 columns whatever MR is, so a row's result does not depend on the other
// rows of the call. Columns split over the thread pool
// in whole panels, which keeps that property. Only this file is compiled for AVX-512, through
// function attributes; available() checks the CPU at run time.

namespace ember::nn::detail {
namespace {

constexpr int64_t kNR = 32;  // panel width: two 16-float vectors
constexpr int kMR = 8;       // rows per block
constexpr int64_t kKC = 256; // inner-dimension slice: 256 x 32 floats of a panel, 32 KiB

#define EMBER_AVX512 __attribute__((target("avx512f,fma")))

template <int MR>
EMBER_AVX512 void block_kernel(int64_t K, const float* a, int64_t lda, const float* panel, float* c, int64_t ldc,
                               __mmask16 m0, __mmask16 m1, bool accumulate) {
  __m512 lo[MR], hi[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    lo[i] = _mm512_setzero_ps();
    hi[i] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < K; ++k) {
    const __m512 b0 = _mm512_loadu_ps(panel + k * kNR);
    const __m512 b1 = _mm512_loadu_ps(panel + k * kNR + 16);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i * lda + k]);
      lo[i] = _mm512_fmadd_ps(ai, b0, lo[i]);
      hi[i] = _mm512_fmadd_ps(ai, b1, hi[i]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    float* ci = c + i * ldc;
    if (accumulate) {
      lo[i] = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, ci), lo[i]);
      hi[i] = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, ci + 16), hi[i]);
    }
    _mm512_mask_storeu_ps(ci, m0, lo[i]);
    _mm512_mask_storeu_ps(ci + 16, m1, hi[i]);
  }
}

using BlockKernel = void (*)(int64_t, const float*, int64_t, const float*, float*, int64_t, __mmask16, __mmask16,
                             bool);
constexpr BlockKernel kKernels[kMR + 1] = {nullptr,          block_kernel<1>, block_kernel<2>,
                                           block_kernel<3>, block_kernel<4>, block_kernel<5>,
                                           block_kernel<6>, block_kernel<7>, block_kernel<8>};

// Panels [p0, p1) of c = (accumulate ? c : 0) + a x B.
void multiply_panels(int64_t p0, int64_t p1, int64_t m, int64_t K, int64_t N, const float* a, int64_t lda,
                     const float* panels, float* c, int64_t ldc, bool accumulate) {
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t j0 = p * kNR;
    const int64_t width = std::min(kNR, N - j0);
    const __mmask16 m0 = width >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << width) - 1);
    const __mmask16 m1 = width >= 32   ? __mmask16(0xFFFF)
                         : width <= 16 ? __mmask16(0)
                                       : static_cast<__mmask16>((1u << (width - 16)) - 1);
    const float* panel = panels + p * kNR * K;
    // K in slices of kKC: a slice of the panel (32 KiB) stays in L1 while every row block
    // passes over it; later slices add onto c.
    for (int64_t k0 = 0; k0 < K; k0 += kKC) {
      const int64_t kc = std::min(kKC, K - k0);
      for (int64_t i = 0; i < m; i += kMR) {
        const int rows = static_cast<int>(std::min<int64_t>(kMR, m - i));
        kKernels[rows](kc, a + i * lda + k0, lda, panel + k0 * kNR, c + i * ldc + j0, ldc, m0, m1,
                       accumulate || k0 > 0);
      }
    }
  }
}

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
}

}  // namespace

bool PackedRhs::available() {
  static const bool on = [] {
    const char* env = std::getenv("EMBER_RNN_PACKED_GEMM");
    if (env != nullptr && std::strcmp(env, "0") == 0) return false;
    return cpu_has_avx512();
  }();
  return on;
}

PackedRhs::PackedRhs(const float* b, int64_t K, int64_t N, int64_t row_stride, int64_t col_stride) : K_(K), N_(N) {
  EMBER_CHECK(K >= 0 && N >= 0, "PackedRhs: expected a K x N matrix with K, N >= 0, got ", K, " x ", N);
  const int64_t num_panels = (N + kNR - 1) / kNR;
  panels_ = empty({std::max<int64_t>(1, num_panels * kNR * K)}, TensorOptions(kFloat32));
  float* out = panels_.data_ptr<float>();
  for (int64_t p = 0; p < num_panels; ++p) {
    float* panel = out + p * kNR * K;
    const int64_t j0 = p * kNR, width = std::min(kNR, N - j0);
    if (width < kNR) std::memset(panel, 0, static_cast<size_t>(kNR * K) * sizeof(float));
    // Walk B along its unit stride: W_hh^T (forward) is read column by column, W_hh (backward)
    // row by row.
    if (row_stride <= col_stride) {
      for (int64_t j = 0; j < width; ++j) {
        const float* col = b + (j0 + j) * col_stride;
        for (int64_t k = 0; k < K; ++k) panel[k * kNR + j] = col[k * row_stride];
      }
    } else {
      for (int64_t k = 0; k < K; ++k) {
        const float* row = b + k * row_stride + j0 * col_stride;
        for (int64_t j = 0; j < width; ++j) panel[k * kNR + j] = row[j * col_stride];
      }
    }
  }
}

void PackedRhs::multiply(int64_t m, const float* a, int64_t lda, float* c, int64_t ldc, bool accumulate) const {
  if (m <= 0 || N_ == 0) return;
  const int64_t num_panels = (N_ + kNR - 1) / kNR;
  const float* panels = panels_.data_ptr<float>();
  if (K_ == 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < m; ++i) std::memset(c + i * ldc, 0, static_cast<size_t>(N_) * sizeof(float));
    }
    return;
  }
  // About 1 MFLOP per chunk at least: below that the pool's hand-off costs more than it saves.
  const int64_t flops_per_panel = 2 * m * K_ * kNR;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 20) / flops_per_panel);
  if (get_num_threads() <= 1 || num_panels <= grain) {
    multiply_panels(0, num_panels, m, K_, N_, a, lda, panels, c, ldc, accumulate);
    return;
  }
  parallel_for(0, num_panels, grain, [&](int64_t p0, int64_t p1) {
    multiply_panels(p0, p1, m, K_, N_, a, lda, panels, c, ldc, accumulate);
  });
}

}  // namespace ember::nn::detail
