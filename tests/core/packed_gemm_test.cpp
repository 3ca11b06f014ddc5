// kernels::cpu::PackedRhs, the recurrent-step GEMM of the RNN layers, under each of its
// kernels this CPU runs (AVX-512, AVX2; ScopedCpuIsa): products against a float64
// reference for shapes around the kernel's 8-row blocks and 32-column panels, both packing
// orders (W^T as the forward reads it, W as the backward does), accumulate or overwrite,
// strided rows, K = 0; a row's result does not depend on the other rows of the call (what
// keeps DataParallel's replicas bit-equal to one device), and the threaded split equals the
// single-thread product bit for bit, and both kernels give the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "core/kernels/cpu/isa.h"
#include "core/kernels/cpu/packed_gemm.h"

namespace ember::kernels::cpu {
namespace {

#define SKIP_WITHOUT_PACKED_GEMM()                                                                   \
  if (!PackedRhs::available())                                                                       \
  GTEST_SKIP() << "this CPU has no AVX2 (or EMBER_RNN_PACKED_GEMM=0): the RNN layers use BLAS there, " \
                  "and rnn_test covers that path"

// The packed kernels this CPU runs.
std::vector<CpuIsa> packed_isas() {
  std::vector<CpuIsa> v;
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (isa <= hardware_isa()) v.push_back(isa);
  }
  return v;
}

std::vector<float> random_values(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& e : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    e = static_cast<float>(static_cast<double>(x >> 11) / static_cast<double>(1ull << 53) - 0.5);
  }
  return v;
}

struct Case {
  int64_t m, K, N;
};

// c = (accumulate ? c0 : 0) + a x B in float64, B(k, n) = b[k * rs + n * cs].
std::vector<double> reference(const Case& s, const std::vector<float>& a, int64_t lda, const std::vector<float>& b,
                              int64_t rs, int64_t cs, const std::vector<float>& c0, int64_t ldc, bool accumulate) {
  std::vector<double> out(static_cast<size_t>(s.m * s.N));
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.N; ++j) {
      double acc = accumulate ? c0[static_cast<size_t>(i * ldc + j)] : 0.0;
      for (int64_t k = 0; k < s.K; ++k)
        acc += static_cast<double>(a[static_cast<size_t>(i * lda + k)]) * b[static_cast<size_t>(k * rs + j * cs)];
      out[static_cast<size_t>(i * s.N + j)] = acc;
    }
  }
  return out;
}

TEST(PackedRhs, MatchesTheFloat64ProductAcrossBlockAndPanelEdges) {
  SKIP_WITHOUT_PACKED_GEMM();
  for (CpuIsa isa : packed_isas()) {
    ScopedCpuIsa scoped(isa);
    SCOPED_TRACE(isa_name(isa));
    const std::vector<Case> cases = {{1, 1, 1},   {1, 7, 33},   {3, 16, 16},  {7, 5, 31},   {8, 32, 32},
                                     {9, 33, 65}, {15, 64, 17}, {16, 256, 1024}, {17, 100, 100}, {64, 1024, 256},
                                     {5, 300, 47}};
    int seed = 0;
    for (const Case& s : cases) {
      for (bool transposed : {false, true}) {
        for (bool accumulate : {false, true}) {
          SCOPED_TRACE(testing::Message() << "m=" << s.m << " K=" << s.K << " N=" << s.N
                                          << (transposed ? " from W (N x K)" : " from B (K x N)")
                                          << (accumulate ? " accumulate" : " overwrite"));
          const int64_t lda = s.K + 3, ldc = s.N + 5;  // rows with gaps: strides are honoured
          auto a = random_values(static_cast<size_t>(s.m * lda), ++seed);
          auto b = random_values(static_cast<size_t>(s.K * s.N), ++seed);
          auto c = random_values(static_cast<size_t>(s.m * ldc), ++seed);
          const auto c0 = c;
          // B as given (row-major K x N) or as W^T of a row-major W (N x K).
          const int64_t rs = transposed ? 1 : s.N, cs = transposed ? s.K : 1;
          PackedRhs packed(b.data(), s.K, s.N, rs, cs);
          EXPECT_EQ(packed.rows(), s.K);
          EXPECT_EQ(packed.cols(), s.N);
          packed.multiply(s.m, a.data(), lda, c.data(), ldc, accumulate);
          const auto want = reference(s, a, lda, b, rs, cs, c0, ldc, accumulate);
          double worst = 0;
          for (int64_t i = 0; i < s.m; ++i) {
            for (int64_t j = 0; j < s.N; ++j) {
              const double err = std::fabs(c[static_cast<size_t>(i * ldc + j)] - want[static_cast<size_t>(i * s.N + j)]);
              worst = std::max(worst, err / (1.0 + std::sqrt(static_cast<double>(s.K))));
            }
            // The gap after each row is left alone.
            for (int64_t j = s.N; j < ldc && i * ldc + j < static_cast<int64_t>(c.size()); ++j)
              ASSERT_EQ(c[static_cast<size_t>(i * ldc + j)], c0[static_cast<size_t>(i * ldc + j)]) << "row " << i;
          }
          EXPECT_LT(worst, 1e-6);
        }
      }
    }
  }
}

TEST(PackedRhs, ZeroInnerDimensionOverwritesOrKeeps) {
  SKIP_WITHOUT_PACKED_GEMM();
  for (CpuIsa isa : packed_isas()) {
    ScopedCpuIsa scoped(isa);
    SCOPED_TRACE(isa_name(isa));
    std::vector<float> b;  // K = 0
    PackedRhs packed(b.data(), 0, 40, 40, 1);
    std::vector<float> a(3, 1.0f), c(3 * 40, 2.5f);
    packed.multiply(3, a.data(), 1, c.data(), 40, /*accumulate=*/true);
    for (float v : c) ASSERT_EQ(v, 2.5f);
    packed.multiply(3, a.data(), 1, c.data(), 40, /*accumulate=*/false);
    for (float v : c) ASSERT_EQ(v, 0.0f);
  }
}

TEST(PackedRhs, ARowsResultDoesNotDependOnTheOtherRows) {
  SKIP_WITHOUT_PACKED_GEMM();
  for (CpuIsa isa : packed_isas()) {
    ScopedCpuIsa scoped(isa);
    SCOPED_TRACE(isa_name(isa));
    const int64_t K = 256, N = 1024, m = 29;
    auto a = random_values(static_cast<size_t>(m * K), 7);
    auto b = random_values(static_cast<size_t>(K * N), 8);
    PackedRhs packed(b.data(), K, N, N, 1);
    std::vector<float> whole(static_cast<size_t>(m * N));
    packed.multiply(m, a.data(), K, whole.data(), N, false);
    // The same rows as a split batch: 29 = 13 + 16, and one row at a time.
    std::vector<float> split(static_cast<size_t>(m * N));
    packed.multiply(13, a.data(), K, split.data(), N, false);
    packed.multiply(16, a.data() + 13 * K, K, split.data() + 13 * N, N, false);
    EXPECT_EQ(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)), 0);
    for (int64_t i = 0; i < m; ++i) packed.multiply(1, a.data() + i * K, K, split.data() + i * N, N, false);
    EXPECT_EQ(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)), 0);
  }
}

TEST(PackedRhs, ThreadedColumnsEqualTheSingleThreadProduct) {
  SKIP_WITHOUT_PACKED_GEMM();
  for (CpuIsa isa : packed_isas()) {
    ScopedCpuIsa scoped(isa);
    SCOPED_TRACE(isa_name(isa));
    const int before = get_num_threads();
    const int64_t K = 256, N = 1000, m = 64;  // 32 panels, the last one partial
    auto a = random_values(static_cast<size_t>(m * K), 11);
    auto b = random_values(static_cast<size_t>(K * N), 12);
    PackedRhs packed(b.data(), K, N, 1, K);
    std::vector<float> one(static_cast<size_t>(m * N)), four(static_cast<size_t>(m * N));
    set_num_threads(1);
    packed.multiply(m, a.data(), K, one.data(), N, false);
    set_num_threads(4);
    packed.multiply(m, a.data(), K, four.data(), N, false);
    set_num_threads(before);
    EXPECT_EQ(std::memcmp(one.data(), four.data(), one.size() * sizeof(float)), 0);
  }
}

TEST(PackedRhs, Avx2AndAvx512KernelsGiveTheSameBits) {
  if (hardware_isa() < CpuIsa::kAvx512 || !PackedRhs::available()) {
    GTEST_SKIP() << "needs a CPU with AVX-512 (this one: " << isa_name(hardware_isa()) << ")";
  }
  const int64_t K = 300, N = 1000, m = 21;  // a K slice edge, a partial panel, row blocks of 8 and 6
  auto a = random_values(static_cast<size_t>(m * K), 21);
  auto b = random_values(static_cast<size_t>(K * N), 22);
  PackedRhs packed(b.data(), K, N, N, 1);
  std::vector<float> c512(static_cast<size_t>(m * N), 1.0f), c256 = c512;
  {
    ScopedCpuIsa scoped(CpuIsa::kAvx512);
    packed.multiply(m, a.data(), K, c512.data(), N, true);
  }
  {
    ScopedCpuIsa scoped(CpuIsa::kAvx2);
    packed.multiply(m, a.data(), K, c256.data(), N, true);
  }
  EXPECT_EQ(std::memcmp(c512.data(), c256.data(), c512.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace ember::kernels::cpu
