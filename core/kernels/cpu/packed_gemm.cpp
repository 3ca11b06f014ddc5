#include "core/kernels/cpu/packed_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/env.h"
#include "core/error.h"
#include "core/kernels/cpu/isa.h"
#include "core/ops/factory.h"
#include "core/thread_pool.h"

// Note [Packed recurrent GEMM]
// B (K x N) is stored as ceil(N / 32) column panels; panel p holds columns [32p, 32p + 32)
// for every k, 32 consecutive floats per k (zero past column N). The AVX-512 kernel computes
// an MR x 32 block of c (MR <= 8) with 2 x MR accumulators: per k it loads the panel's two
// vectors once and broadcasts each row's a[i][k] into two FMAs, so B is read from L1/L2 once
// per MR rows and never re-packed. The AVX2 kernel takes a panel as two halves of 16 columns
// and computes MR x 16 blocks (MR <= 6, 12 of the 16 ymm registers as accumulators). K runs in
// slices of 256 (a 32 KiB slice of the panel stays in L1 across all row blocks; each slice
// after the first adds onto c). Every row's sum runs over k in ascending order, slice by slice,
// one FMA per k into one accumulator per column, whatever MR and whichever kernel, so a row's
// result depends neither on the other rows of the call nor on the ISA. Columns split over the
// thread pool in whole panels, which keeps that property. Only the kernels below are compiled
// for AVX2/AVX-512, through function attributes (isa.h); available() checks cpu_isa().

namespace ember::kernels::cpu {
namespace {

constexpr int64_t kNR = 32;   // panel width
constexpr int kMR512 = 8;     // rows per AVX-512 block
constexpr int kMR256 = 6;     // rows per AVX2 block
constexpr int64_t kKC = 256;  // inner-dimension slice: 256 x 32 floats of a panel, 32 KiB

#if EMBER_HAVE_X86_VARIANTS

template <int MR>
EMBER_TARGET_AVX512 void block_kernel_512(int64_t K, const float* a, int64_t lda, const float* panel, float* c,
                                          int64_t ldc, int width, bool accumulate) {
  const __mmask16 m0 = width >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << width) - 1);
  const __mmask16 m1 = width >= 32   ? __mmask16(0xFFFF)
                       : width <= 16 ? __mmask16(0)
                                     : static_cast<__mmask16>((1u << (width - 16)) - 1);
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

// Lane mask for the first n (0..8) of 8 floats.
EMBER_TARGET_AVX2 inline __m256i lanes_avx2(int n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

// An MR x 16 block: `half` points at column 0 or 16 of a panel (row stride kNR); width 1..16.
template <int MR>
EMBER_TARGET_AVX2 void block_kernel_256(int64_t K, const float* a, int64_t lda, const float* half, float* c,
                                        int64_t ldc, int width, bool accumulate) {
  __m256 lo[MR], hi[MR];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    lo[i] = _mm256_setzero_ps();
    hi[i] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < K; ++k) {
    const __m256 b0 = _mm256_loadu_ps(half + k * kNR);
    const __m256 b1 = _mm256_loadu_ps(half + k * kNR + 8);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i * lda + k);
      lo[i] = _mm256_fmadd_ps(ai, b0, lo[i]);
      hi[i] = _mm256_fmadd_ps(ai, b1, hi[i]);
    }
  }
  if (width == 16) {
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      float* ci = c + i * ldc;
      if (accumulate) {
        lo[i] = _mm256_add_ps(_mm256_loadu_ps(ci), lo[i]);
        hi[i] = _mm256_add_ps(_mm256_loadu_ps(ci + 8), hi[i]);
      }
      _mm256_storeu_ps(ci, lo[i]);
      _mm256_storeu_ps(ci + 8, hi[i]);
    }
    return;
  }
  const __m256i m0 = lanes_avx2(std::min(width, 8)), m1 = lanes_avx2(std::max(width - 8, 0));
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    float* ci = c + i * ldc;
    if (accumulate) {
      lo[i] = _mm256_add_ps(_mm256_maskload_ps(ci, m0), lo[i]);
      hi[i] = _mm256_add_ps(_mm256_maskload_ps(ci + 8, m1), hi[i]);
    }
    _mm256_maskstore_ps(ci, m0, lo[i]);
    _mm256_maskstore_ps(ci + 8, m1, hi[i]);
  }
}

using BlockKernel = void (*)(int64_t, const float*, int64_t, const float*, float*, int64_t, int, bool);
constexpr BlockKernel kKernels512[kMR512 + 1] = {
    nullptr,             block_kernel_512<1>, block_kernel_512<2>, block_kernel_512<3>, block_kernel_512<4>,
    block_kernel_512<5>, block_kernel_512<6>, block_kernel_512<7>, block_kernel_512<8>};
constexpr BlockKernel kKernels256[kMR256 + 1] = {nullptr,             block_kernel_256<1>, block_kernel_256<2>,
                                                 block_kernel_256<3>, block_kernel_256<4>, block_kernel_256<5>,
                                                 block_kernel_256<6>};

// Panels [p0, p1) of c = (accumulate ? c : 0) + a x B.
void multiply_panels(bool avx512, int64_t p0, int64_t p1, int64_t m, int64_t K, int64_t N, const float* a,
                     int64_t lda, const float* panels, float* c, int64_t ldc, bool accumulate) {
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t j0 = p * kNR;
    const int width = static_cast<int>(std::min(kNR, N - j0));
    const float* panel = panels + p * kNR * K;
    // K in slices of kKC: a slice of the panel (32 KiB) stays in L1 while every row block
    // passes over it; later slices add onto c.
    for (int64_t k0 = 0; k0 < K; k0 += kKC) {
      const int64_t kc = std::min(kKC, K - k0);
      const bool acc = accumulate || k0 > 0;
      if (avx512) {
        for (int64_t i = 0; i < m; i += kMR512) {
          const int rows = static_cast<int>(std::min<int64_t>(kMR512, m - i));
          kKernels512[rows](kc, a + i * lda + k0, lda, panel + k0 * kNR, c + i * ldc + j0, ldc, width, acc);
        }
      } else {
        for (int h = 0; h < 2; ++h) {
          const int w = std::clamp(width - 16 * h, 0, 16);
          if (w == 0) continue;
          for (int64_t i = 0; i < m; i += kMR256) {
            const int rows = static_cast<int>(std::min<int64_t>(kMR256, m - i));
            kKernels256[rows](kc, a + i * lda + k0, lda, panel + k0 * kNR + 16 * h, c + i * ldc + j0 + 16 * h, ldc,
                              w, acc);
          }
        }
      }
    }
  }
}

#endif  // EMBER_HAVE_X86_VARIANTS

}  // namespace

bool PackedRhs::available() {
#if EMBER_HAVE_X86_VARIANTS
  static const bool enabled = env::flag("EMBER_RNN_PACKED_GEMM", true);
  return enabled && cpu_isa() >= CpuIsa::kAvx2;
#else
  return false;
#endif
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
  EMBER_INTERNAL_ASSERT(available(), "PackedRhs::multiply on a CPU without AVX2 (check available() first)");
#if EMBER_HAVE_X86_VARIANTS
  const int64_t num_panels = (N_ + kNR - 1) / kNR;
  const float* panels = panels_.data_ptr<float>();
  if (K_ == 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < m; ++i) std::memset(c + i * ldc, 0, static_cast<size_t>(N_) * sizeof(float));
    }
    return;
  }
  const bool avx512 = cpu_isa() >= CpuIsa::kAvx512;
  // About 1 MFLOP per chunk at least: below that the pool's hand-off costs more than it saves.
  const int64_t flops_per_panel = 2 * m * K_ * kNR;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 20) / flops_per_panel);
  if (get_num_threads() <= 1 || num_panels <= grain) {
    multiply_panels(avx512, 0, num_panels, m, K_, N_, a, lda, panels, c, ldc, accumulate);
    return;
  }
  parallel_for(0, num_panels, grain, [&](int64_t p0, int64_t p1) {
    multiply_panels(avx512, p0, p1, m, K_, N_, a, lda, panels, c, ldc, accumulate);
  });
#endif
}

}  // namespace ember::kernels::cpu
