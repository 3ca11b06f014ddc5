// The hand-vectorized CPU kernels (core/kernels/cpu/) under every ISA variant this CPU runs
// (ScopedCpuIsa): softmax / log_softmax rows and their backward, and total_norm, against plain
// float64 loops, at row lengths around every vector width and with -inf / NaN entries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/kernels/cpu/isa.h"
#include "core/kernels/cpu/norm.h"
#include "core/kernels/softmax.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"
#include "core/thread_pool.h"

namespace {

using namespace ember;
using kernels::cpu::CpuIsa;
using kernels::cpu::ScopedCpuIsa;

std::vector<CpuIsa> supported_isas() {
  std::vector<CpuIsa> v;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (static_cast<int>(isa) <= static_cast<int>(kernels::cpu::hardware_isa())) v.push_back(isa);
  }
  return v;
}

std::vector<float> random_floats(int64_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(gen);
  return v;
}

// The reference of one row: the scalar line functor of core/kernels/softmax.h (the kernel of
// every other case and of CUDA) in float64.
std::vector<double> ref_softmax_row(const float* x, int64_t C, bool log) {
  const std::vector<double> xd(x, x + C);
  std::vector<double> y(static_cast<size_t>(C));
  kernels::SoftmaxLineF<double>{kernels::LineGeometry{1, C}, log, xd.data(), y.data()}(0);
  return y;
}

void expect_close(double got, double want, double rtol, double atol, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": got " << got << ", want NaN";
  } else if (std::isinf(want)) {
    EXPECT_EQ(got, want) << what;
  } else {
    EXPECT_LE(std::fabs(got - want), atol + rtol * std::fabs(want)) << what << ": got " << got << ", want " << want;
  }
}

TEST(CpuKernels, SoftmaxRowsMatchFloat64AtEveryWidthAndIsa) {
  for (CpuIsa isa : supported_isas()) {
    ScopedCpuIsa scoped(isa);
    for (int64_t C : {1, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 47, 100, 5000}) {
      const int64_t R = 5;
      std::vector<float> xv = random_floats(R * C, static_cast<uint32_t>(C), -20.0f, 20.0f);
      if (C > 2) xv[static_cast<size_t>(C + 1)] = -INFINITY;  // masked entry in row 1
      Tensor x = from_vector<float>(xv, {R, C});
      for (bool log : {false, true}) {
        Tensor y = log ? native::log_softmax(x, 1) : native::softmax(x, 1);
        std::vector<float> yv = y.to_vector<float>();
        for (int64_t r = 0; r < R; ++r) {
          auto want = ref_softmax_row(xv.data() + r * C, C, log);
          for (int64_t c = 0; c < C; ++c) {
            expect_close(yv[static_cast<size_t>(r * C + c)], want[static_cast<size_t>(c)], 2e-6, log ? 2e-5 : 1e-7,
                         std::string(kernels::cpu::isa_name(isa)) + (log ? " log_softmax" : " softmax") + " C=" +
                             std::to_string(C) + " r=" + std::to_string(r) + " c=" + std::to_string(c));
          }
        }
      }
    }
  }
}

TEST(CpuKernels, SoftmaxBackwardRowsMatchFloat64AtEveryWidthAndIsa) {
  for (CpuIsa isa : supported_isas()) {
    ScopedCpuIsa scoped(isa);
    for (int64_t C : {1, 5, 16, 33, 257}) {
      const int64_t R = 3;
      std::vector<float> xv = random_floats(R * C, 7u + static_cast<uint32_t>(C), -4.0f, 4.0f);
      std::vector<float> gv = random_floats(R * C, 9u + static_cast<uint32_t>(C), -1.0f, 1.0f);
      Tensor x = from_vector<float>(xv, {R, C}), g = from_vector<float>(gv, {R, C});
      for (bool log : {false, true}) {
        Tensor y = log ? native::log_softmax(x, 1) : native::softmax(x, 1);
        std::vector<float> yv = y.to_vector<float>();
        Tensor gx = log ? native::log_softmax_backward(g, y, 1) : native::softmax_backward(g, y, 1);
        std::vector<float> gxv = gx.to_vector<float>();
        const std::vector<double> gd(gv.begin(), gv.end()), yd(yv.begin(), yv.end());
        std::vector<double> want_gx(gd.size());
        const kernels::SoftmaxBackwardLineF<double> ref{kernels::LineGeometry{1, C}, log, gd.data(), yd.data(),
                                                         want_gx.data()};
        for (int64_t r = 0; r < R; ++r) {
          ref(r);
          for (int64_t c = 0; c < C; ++c) {
            const size_t k = static_cast<size_t>(r * C + c);
            expect_close(gxv[k], want_gx[k], 1e-5, 1e-6,
                         std::string(kernels::cpu::isa_name(isa)) + " backward C=" + std::to_string(C));
          }
        }
      }
    }
  }
}

TEST(CpuKernels, SoftmaxRowsPropagateNaNAndGiveNaNForAllMinusInfRows) {
  for (CpuIsa isa : supported_isas()) {
    ScopedCpuIsa scoped(isa);
    for (int64_t C : {3, 40}) {
      std::vector<float> xv(static_cast<size_t>(2 * C), 0.5f);
      xv[1] = std::numeric_limits<float>::quiet_NaN();
      for (int64_t c = 0; c < C; ++c) xv[static_cast<size_t>(C + c)] = -INFINITY;
      Tensor x = from_vector<float>(xv, {2, C});
      for (Tensor y : {native::softmax(x, 1), native::log_softmax(x, 1)}) {
        for (float v : y.to_vector<float>()) EXPECT_TRUE(std::isnan(v)) << kernels::cpu::isa_name(isa) << " C=" << C;
      }
    }
  }
}

TEST(CpuKernels, SoftmaxRowsDoNotDependOnTheThreadCount) {
  std::vector<float> xv = random_floats(300 * 700, 3u, -10.0f, 10.0f);
  Tensor x = from_vector<float>(xv, {300, 700});
  const int saved = get_num_threads();
  set_num_threads(1);
  std::vector<float> one = native::log_softmax(x, 1).to_vector<float>();
  set_num_threads(3);
  std::vector<float> three = native::log_softmax(x, 1).to_vector<float>();
  set_num_threads(saved);
  EXPECT_EQ(one, three);
}

double ref_norm(const std::vector<std::vector<float>>& ts, double p) {
  if (std::isinf(p)) {
    double m = p > 0 ? 0.0 : INFINITY;
    for (const auto& t : ts) {
      for (float v : t) m = p > 0 ? std::max(m, std::fabs(static_cast<double>(v))) : std::min(m, std::fabs(static_cast<double>(v)));
    }
    return m;
  }
  double s = 0;
  for (const auto& t : ts) {
    for (float v : t) s += std::pow(std::fabs(static_cast<double>(v)), p);
  }
  return std::pow(s, 1.0 / p);
}

TEST(CpuKernels, TotalNormOverManyTensorsMatchesFloat64) {
  // Sizes around the vector widths, the 512-element block and the 65536-element chunk.
  std::vector<std::vector<float>> vals;
  std::vector<Tensor> ts;
  uint32_t seed = 1;
  for (int64_t n : {1, 17, 511, 513, 65535, 65537, 200000}) {
    vals.push_back(random_floats(n, seed++, -3.0f, 3.0f));
    ts.push_back(from_vector<float>(vals.back(), {n}));
  }
  // A non-contiguous view.
  Tensor m = from_vector<float>(random_floats(40 * 30, 99u, -2.0f, 2.0f), {40, 30});
  Tensor mt = native::t(m);
  vals.push_back(native::contiguous(mt).to_vector<float>());
  ts.push_back(mt);
  for (CpuIsa isa : supported_isas()) {
    ScopedCpuIsa scoped(isa);
    for (double p : {2.0, 1.0, 3.0, double(INFINITY), -double(INFINITY)}) {
      const double want = ref_norm(vals, p);
      EXPECT_NEAR(native::total_norm(ts, p), want, 1e-6 * want) << kernels::cpu::isa_name(isa) << " p=" << p;
    }
  }
  std::vector<Tensor> doubles{native::to(ts[5], kFloat64)};
  EXPECT_NEAR(native::total_norm(doubles, 2.0), ref_norm({vals[5]}, 2.0), 1e-9 * ref_norm({vals[5]}, 2.0));
  EXPECT_EQ(native::total_norm({}, 2.0), 0.0);
  EXPECT_TRUE(std::isnan(native::total_norm({from_vector<float>({1.0f, NAN}, {2})}, 2.0)));
  EXPECT_TRUE(std::isnan(native::total_norm({from_vector<float>({1.0f, NAN}, {2})}, INFINITY)));
}

TEST(CpuKernels, TotalNormDoesNotDependOnTheThreadCount) {
  Tensor t = from_vector<float>(random_floats(1 << 20, 5u, -1.0f, 1.0f), {1 << 20});
  const int saved = get_num_threads();
  set_num_threads(1);
  const double one = native::total_norm({t}, 2.0);
  set_num_threads(3);
  const double three = native::total_norm({t}, 2.0);
  set_num_threads(saved);
  EXPECT_EQ(one, three);
}

// norm_partials' contract (core/kernels/cpu/norm.h): for each span in order, one result per
// kNormChunk elements from the span's start (the last shorter, none for an empty span), each the
// result the same chunk gives as a span of its own: the chunk boundaries and order, on 1 and 3
// threads, float32 (the vector p = 2 path and the generic one) and float64.
TEST(CpuKernels, NormPartialsAreOneResultPerChunkOfEachSpanInOrder) {
  using kernels::cpu::kNormChunk;
  using kernels::cpu::NormSpan;
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<double>> f64;
  std::vector<NormSpan> spans;
  uint32_t seed = 40;
  for (int64_t n : {int64_t{0}, int64_t{5}, kNormChunk, 2 * kNormChunk + 3, int64_t{0}, kNormChunk - 1}) {
    f32.push_back(random_floats(n, seed++, -3.0f, 3.0f));
  }
  f64.push_back(std::vector<double>(f32[3].begin(), f32[3].end()));
  for (auto& v : f32) spans.push_back({kFloat32, v.data(), static_cast<int64_t>(v.size())});
  spans.insert(spans.begin() + 2, NormSpan{kFloat64, f64[0].data(), static_cast<int64_t>(f64[0].size())});
  const int saved = get_num_threads();
  for (int threads : {1, 3}) {
    set_num_threads(threads);
    for (double p : {2.0, 1.0, double(INFINITY)}) {
      const std::vector<double> out = kernels::cpu::norm_partials(spans, p);
      size_t k = 0;
      for (const NormSpan& s : spans) {
        for (int64_t b = 0; b < s.n; b += kNormChunk, ++k) {
          const NormSpan chunk{s.dtype, static_cast<char*>(s.x) + b * static_cast<int64_t>(element_size(s.dtype)),
                               std::min(kNormChunk, s.n - b)};
          if (k >= out.size()) continue;  // counted; the size check below fails
          EXPECT_EQ(out[k], kernels::cpu::norm_partials({chunk}, p)[0])
              << "chunk " << k << " (elements " << b << ".. of a span of " << s.n << "), p=" << p << ", " << threads
              << " threads";
        }
      }
      EXPECT_EQ(out.size(), k) << "p=" << p;
    }
  }
  set_num_threads(saved);
  EXPECT_TRUE(kernels::cpu::norm_partials({}, 2.0).empty());
}

TEST(CpuKernels, ScaleAllEqualsMulBitForBitAndBumpsVersions) {
  for (CpuIsa isa : supported_isas()) {
    ScopedCpuIsa scoped(isa);
    Tensor a = from_vector<float>(random_floats(300001, 4u, -5.0f, 5.0f), {300001});
    Tensor m = native::t(from_vector<float>(random_floats(12, 6u, -1.0f, 1.0f), {3, 4}));  // strided
    Tensor d = native::to(a, kFloat64);
    std::vector<float> want = native::mul(a, 0.37).to_vector<float>();
    std::vector<float> want_m = native::mul(m, 0.37).to_vector<float>();
    std::vector<double> want_d = native::mul(d, 0.37).to_vector<double>();
    const auto v0 = a.version();
    native::scale_all_({a, m, d, Tensor()}, 0.37);
    EXPECT_EQ(a.to_vector<float>(), want) << kernels::cpu::isa_name(isa);
    EXPECT_EQ(m.to_vector<float>(), want_m);
    EXPECT_EQ(d.to_vector<double>(), want_d);
    EXPECT_GT(a.version(), v0);
  }
}

TEST(CpuKernels, IsaCapFollowsScopedCpuIsa) {
  const CpuIsa before = kernels::cpu::cpu_isa();
  {
    ScopedCpuIsa scoped(CpuIsa::kBaseline);
    EXPECT_EQ(kernels::cpu::cpu_isa(), CpuIsa::kBaseline);
  }
  EXPECT_EQ(kernels::cpu::cpu_isa(), before);
}

}  // namespace
