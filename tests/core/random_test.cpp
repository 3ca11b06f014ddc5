// Random ops on CPU: reproducibility (seeds, states, thread counts), the stream layout,
// distribution sanity with generous bounds, argument checks, in-place version bumps.
#include "core/ops/random.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "core/kernels/philox.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/thread_pool.h"

namespace ember {
namespace {

template <typename T>
std::vector<T> values(const Tensor& t) {  // contiguous tensors only
  EXPECT_TRUE(t.is_contiguous());
  const T* p = t.data_ptr<T>();
  return std::vector<T>(p, p + t.numel());
}

struct Moments {
  double mean = 0, var = 0, min = 0, max = 0;
};
template <typename T>
Moments moments(const std::vector<T>& v) {
  Moments m;
  m.min = m.max = static_cast<double>(v[0]);
  double s = 0;
  for (T x : v) {
    double d = static_cast<double>(x);
    s += d;
    m.min = std::min(m.min, d);
    m.max = std::max(m.max, d);
  }
  m.mean = s / static_cast<double>(v.size());
  double q = 0;
  for (T x : v) q += (static_cast<double>(x) - m.mean) * (static_cast<double>(x) - m.mean);
  m.var = q / static_cast<double>(v.size() - 1);
  return m;
}

// Element i of a contiguous bfloat16 or float16 tensor, as float.
float sixteen_bit_value(const Tensor& t, int64_t i) {
  const uint16_t bits = static_cast<const uint16_t*>(t.raw_data())[i];
  if (t.dtype() == kBFloat16) {
    BFloat16 b;
    b.bits = bits;
    return b;
  }
  Half h;
  h.bits = bits;
  return h;
}

// Restores the thread count, which some tests change.
class Random : public ::testing::Test {
 protected:
  ~Random() override { set_num_threads(saved_threads_); }
  const int saved_threads_ = get_num_threads();
};

TEST_F(Random, SameSeedSameNumbersDifferentSeedsDiffer) {
  Generator a(11), b(11), c(12);
  auto va = values<float>(rand({1000}, {}, &a));
  auto vb = values<float>(rand({1000}, {}, &b));
  auto vc = values<float>(rand({1000}, {}, &c));
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, vc);
  // The generator advanced: the next call gives new numbers.
  EXPECT_NE(values<float>(rand({1000}, {}, &a)), va);
}

TEST_F(Random, ManualSeedDrivesTheDefaultGenerator) {
  manual_seed(77);
  auto x = values<double>(randn({257}, kFloat64));
  auto i = values<int64_t>(randint(0, 1000, {33}));
  manual_seed(77);
  EXPECT_EQ(values<double>(randn({257}, kFloat64)), x);
  EXPECT_EQ(values<int64_t>(randint(0, 1000, {33})), i);
}

TEST_F(Random, GetSetStateReplaysTheStream) {
  Generator g(5);
  rand({10}, {}, &g);
  auto state = g.get_state();
  auto first = values<float>(randn({100}, {}, &g));
  auto perm = values<int64_t>(randperm(50, kInt64, &g));
  g.set_state(state);
  EXPECT_EQ(values<float>(randn({100}, {}, &g)), first);
  EXPECT_EQ(values<int64_t>(randperm(50, kInt64, &g)), perm);
}

TEST_F(Random, ResultsDoNotDependOnThreadCount) {
  auto draw = [] {
    Generator g(2024);
    std::vector<std::vector<double>> out;
    auto add = [&](const Tensor& t) {
      std::vector<double> v(static_cast<size_t>(t.numel()));
      if (t.dtype() == kFloat32) {
        auto f = values<float>(t);
        std::copy(f.begin(), f.end(), v.begin());
      } else if (t.dtype() == kFloat64) {
        v = values<double>(t);
      } else {
        auto f = values<int64_t>(t);
        std::copy(f.begin(), f.end(), v.begin());
      }
      out.push_back(v);
    };
    add(rand({100003}, {}, &g));  // not a multiple of 4: the last block is partial
    add(rand({50001}, kFloat64, &g));
    add(randn({100001}, {}, &g));
    add(randn({70001}, kFloat64, &g));
    add(randint(-5, 5, {90001}, kInt64, &g));
    add(bernoulli({80001}, 0.3, {}, &g));
    return out;
  };
  set_num_threads(1);
  auto one = draw();
  set_num_threads(2);
  auto two = draw();
  set_num_threads(4);
  auto four = draw();
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, four);
}

TEST_F(Random, RandFollowsTheStreamLayout) {
  // See Note [Philox stream layout]: float32 element i = lane i % 4 of block i / 4.
  Generator g(99);
  g.reserve(7);
  auto v = values<float>(rand({9}, {}, &g));
  for (int i = 0; i < 9; ++i) {
    auto blk = kernels::philox_block(99, 7, static_cast<uint64_t>(i / 4));
    EXPECT_EQ(v[i], kernels::uint32_to_unit_float(blk.v[i % 4])) << i;
  }
  EXPECT_EQ(g.reserve(0).offset, 7u + 3u);  // ceil(9 / 4) blocks consumed
  auto d = values<double>(rand({3}, kFloat64, &g));
  for (int i = 0; i < 3; ++i) {
    auto blk = kernels::philox_block(99, 10, static_cast<uint64_t>(i / 2));
    EXPECT_EQ(d[i], kernels::uint64_to_unit_double(kernels::philox_u64(blk, i % 2))) << i;
  }
}

TEST_F(Random, RandIsUniformOnUnitInterval) {
  Generator g(1);
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor t = rand({100000}, dt, &g);
    EXPECT_EQ(t.dtype(), dt);
    Moments m = dt == kFloat32 ? moments(values<float>(t)) : moments(values<double>(t));
    EXPECT_GE(m.min, 0.0);
    EXPECT_LT(m.max, 1.0);
    EXPECT_NEAR(m.mean, 0.5, 0.01);      // sd of the mean ~ 0.0009
    EXPECT_NEAR(m.var, 1.0 / 12, 0.005);
  }
}

TEST_F(Random, SixteenBitRandStaysBelowOne) {
  Generator g(3);
  for (DType dt : {kBFloat16, kFloat16}) {
    Tensor t = rand({20000}, dt, &g);
    double sum = 0, mx = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float f = sixteen_bit_value(t, i);
      ASSERT_GE(f, 0.0f);
      ASSERT_LT(f, 1.0f);
      sum += f;
      mx = std::max<double>(mx, f);
    }
    EXPECT_NEAR(sum / 20000, 0.5, 0.02);
    EXPECT_GT(mx, 0.9);
  }
}

TEST_F(Random, SixteenBitUniformStaysHalfOpen) {
  // In [1, 2) bfloat16 has 2^7 values, so from + (to - from) * u rounds up to `to` for ~1/256
  // of the draws unless uniform_ clamps; likewise [-1, 0) must never produce 0.
  Generator g(16);
  for (DType dt : {kBFloat16, kFloat16}) {
    for (auto [from, to] : {std::pair{1.0, 2.0}, std::pair{-1.0, 0.0}}) {
      Tensor t = empty({20000}, dt);
      uniform_(t, from, to, &g);
      for (int64_t i = 0; i < t.numel(); ++i) {
        const float f = sixteen_bit_value(t, i);
        ASSERT_GE(f, from) << dt;
        ASSERT_LT(f, to) << dt;
      }
    }
  }
}

TEST_F(Random, RandnIsStandardNormal) {
  Generator g(2);
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor t = randn({100000}, dt, &g);
    Moments m = dt == kFloat32 ? moments(values<float>(t)) : moments(values<double>(t));
    EXPECT_NEAR(m.mean, 0.0, 0.02);  // sd of the mean ~ 0.003
    EXPECT_NEAR(m.var, 1.0, 0.03);
    EXPECT_LT(m.min, -3.0);
    EXPECT_GT(m.max, 3.0);
    EXPECT_TRUE(std::isfinite(m.min) && std::isfinite(m.max));
  }
}

TEST_F(Random, NormalAndUniformInPlaceRespectParametersAndBumpVersion) {
  Generator g(4);
  Tensor t = empty({100000}, kFloat64);
  uint32_t v0 = t.version();
  normal_(t, 3.0, 2.0, &g);
  EXPECT_EQ(t.version(), v0 + 1);
  Moments m = moments(values<double>(t));
  EXPECT_NEAR(m.mean, 3.0, 0.05);
  EXPECT_NEAR(m.var, 4.0, 0.15);

  uniform_(t, -2.0, 6.0, &g);
  EXPECT_EQ(t.version(), v0 + 2);
  m = moments(values<double>(t));
  EXPECT_GE(m.min, -2.0);
  EXPECT_LT(m.max, 6.0);
  EXPECT_NEAR(m.mean, 2.0, 0.1);
  EXPECT_NEAR(m.var, 64.0 / 12, 0.2);

  normal_(t, -1.0, 0.0, &g);  // std = 0: every value is the mean
  for (double x : values<double>(t)) ASSERT_EQ(x, -1.0);

  Tensor f = empty({1000}, kFloat32);
  uniform_(f, 1.0, 1.0 + 1e-6, &g);  // a range a few float ulps wide stays half-open
  for (float x : values<float>(f)) {
    ASSERT_GE(x, 1.0f);
    ASSERT_LT(static_cast<double>(x), 1.0 + 1e-6);
  }
}

TEST_F(Random, InPlaceOnNonContiguousViewMatchesContiguous) {
  // A transposed 3x5 view over a 5x3 buffer: element (i, j) of the view is buffer[j * 3 + i].
  Tensor base = zeros({5, 3}, kFloat32);
  Tensor view = native::transpose(base, 0, 1);
  ASSERT_FALSE(view.is_contiguous());
  Generator g1(8), g2(8);
  uniform_(view, 0.0, 1.0, &g1);
  auto expect = values<float>(rand({3, 5}, {}, &g2));
  const float* buf = base.data_ptr<float>();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) EXPECT_EQ(buf[j * 3 + i], expect[static_cast<size_t>(i * 5 + j)]);
  EXPECT_EQ(base.version(), view.version());  // views share the counter
}

TEST_F(Random, RandintStaysInRangeAndHitsEveryValue) {
  Generator g(6);
  Tensor t = randint(-3, 4, {100000}, kInt64, &g);
  EXPECT_EQ(t.dtype(), kInt64);
  std::vector<int64_t> counts(7, 0);
  for (int64_t x : values<int64_t>(t)) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 4);
    ++counts[static_cast<size_t>(x + 3)];
  }
  for (int64_t c : counts) EXPECT_NEAR(static_cast<double>(c), 100000.0 / 7, 600.0);  // sd ~ 110

  Tensor i32 = randint(0, 2, {1000}, kInt32, &g);
  for (int32_t x : values<int32_t>(i32)) ASSERT_TRUE(x == 0 || x == 1);
  Tensor f = randint(10, 20, {1000}, kFloat32, &g);
  for (float x : values<float>(f)) ASSERT_TRUE(x >= 10 && x < 20 && x == std::floor(x));

  // The full int64 range does not overflow.
  Tensor wide = randint(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), {1000}, kInt64, &g);
  int negatives = 0;
  for (int64_t x : values<int64_t>(wide)) negatives += x < 0;
  EXPECT_GT(negatives, 350);
  EXPECT_LT(negatives, 650);
}

TEST_F(Random, RandpermIsAPermutation) {
  Generator g(7);
  for (int64_t n : {0, 1, 2, 3, 10, 1001}) {
    auto p = values<int64_t>(randperm(n, kInt64, &g));
    ASSERT_EQ(static_cast<int64_t>(p.size()), n);
    std::vector<int64_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i);
  }
  auto a = values<int64_t>(randperm(1001, kInt64, &g));
  std::vector<int64_t> identity(1001);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(a, identity);
  auto i32 = values<int32_t>(randperm(100, kInt32, &g));
  std::sort(i32.begin(), i32.end());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(i32[static_cast<size_t>(i)], i);
}

TEST_F(Random, RandpermPositionsAreRoughlyUniform) {
  // Where element 0 ends up in randperm(4), over many draws: each position ~ 1/4.
  Generator g(12);
  std::vector<int> where(4, 0);
  for (int rep = 0; rep < 8000; ++rep) {
    auto p = values<int64_t>(randperm(4, kInt64, &g));
    for (int k = 0; k < 4; ++k)
      if (p[static_cast<size_t>(k)] == 0) ++where[static_cast<size_t>(k)];
  }
  for (int c : where) EXPECT_NEAR(c, 2000, 250);  // sd ~ 39
}

TEST_F(Random, BernoulliMatchesProbabilities) {
  Generator g(9);
  Tensor ones = bernoulli({100000}, 0.25, {}, &g);
  Moments m = moments(values<float>(ones));
  EXPECT_NEAR(m.mean, 0.25, 0.01);
  EXPECT_GE(m.min, 0.0);
  EXPECT_LE(m.max, 1.0);
  for (float x : values<float>(ones)) ASSERT_TRUE(x == 0.0f || x == 1.0f);

  std::vector<double> pv(100000);
  for (size_t i = 0; i < pv.size(); ++i) pv[i] = (i % 2) ? 0.9 : 0.0;
  Tensor p = empty({100000}, kFloat64);
  std::memcpy(p.raw_data(), pv.data(), pv.size() * sizeof(double));
  auto b = values<double>(bernoulli(p, &g));
  double odd = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (i % 2 == 0) ASSERT_EQ(b[i], 0.0);
    else odd += b[i];
  }
  EXPECT_NEAR(odd / 50000, 0.9, 0.01);

  Tensor allones = bernoulli({100}, 1.0, kInt64, &g);
  for (int64_t x : values<int64_t>(allones)) ASSERT_EQ(x, 1);
  Tensor none = bernoulli({100}, 0.0, kBool, &g);
  for (int64_t i = 0; i < 100; ++i) ASSERT_FALSE(none.data_ptr<bool>()[i]);
}

TEST_F(Random, BernoulliOfTensorEqualsRandBelowP) {
  // Both use the float32 stream layout, so with the same state they compare the same uniforms.
  Tensor p = full({1000}, 0.4, kFloat32);
  Generator a(13), b(13);
  auto bern = values<float>(bernoulli(p, &a));
  auto u = values<float>(rand({1000}, {}, &b));
  for (size_t i = 0; i < u.size(); ++i) ASSERT_EQ(bern[i], u[i] < 0.4f ? 1.0f : 0.0f);
}

TEST_F(Random, BadArgumentsThrowTypedErrorsAndLeaveGeneratorAlone) {
  Generator g(10);
  EXPECT_THROW(rand({3}, kInt64, &g), TypeError);
  EXPECT_THROW(randn({3}, kBool, &g), TypeError);
  EXPECT_THROW(randint(5, 5, {3}, kInt64, &g), ValueError);
  EXPECT_THROW(randint(6, 5, {3}, kInt64, &g), ValueError);
  EXPECT_THROW(randint(0, int64_t{1} << 40, {3}, kInt32, &g), ValueError);
  EXPECT_THROW(randint(0, 5, {3}, kBool, &g), TypeError);
  EXPECT_THROW(randperm(-1, kInt64, &g), ValueError);
  EXPECT_THROW(bernoulli({3}, 1.5, {}, &g), ValueError);
  EXPECT_THROW(bernoulli({3}, -0.1, {}, &g), ValueError);
  EXPECT_THROW(bernoulli({3}, std::nan(""), {}, &g), ValueError);
  Tensor bad = full({4}, 2.0, kFloat32);
  EXPECT_THROW(bernoulli(bad, &g), ValueError);
  EXPECT_THROW(bernoulli(full({4}, 1.0, kInt64), &g), TypeError);

  Tensor t = zeros({4}, kFloat32);
  uint32_t v0 = t.version();
  EXPECT_THROW(uniform_(t, 1.0, 0.0, &g), ValueError);
  EXPECT_THROW(uniform_(t, 0.0, INFINITY, &g), ValueError);
  EXPECT_THROW(normal_(t, 0.0, -1.0, &g), ValueError);
  Tensor ints = zeros({4}, kInt64);
  EXPECT_THROW(uniform_(ints, 0.0, 1.0, &g), TypeError);
  EXPECT_THROW(normal_(ints, 0.0, 1.0, &g), TypeError);
  EXPECT_EQ(t.version(), v0);  // nothing was written
  for (float x : values<float>(t)) EXPECT_EQ(x, 0.0f);
  EXPECT_EQ(g.reserve(0).offset, 0u);  // no failed call consumed numbers

  Generator cuda_gen(1, Device::cuda(0));
  EXPECT_THROW(rand({3}, {}, &cuda_gen), ValueError);  // generator for the wrong device type
  // Random ops run on CUDA (tests/core/cuda_ops_test.cpp); without a device it is a clear Error.
  if (cuda_device_count() == 0) {
    EXPECT_THROW(rand({3}, TensorOptions(kFloat32).device(Device::cuda(0))), Error);
  }
}

TEST_F(Random, EmptyAndScalarShapes) {
  Generator g(14);
  EXPECT_EQ(rand({0}, {}, &g).numel(), 0);
  EXPECT_EQ(randn({2, 0, 3}, {}, &g).numel(), 0);
  EXPECT_EQ(g.reserve(0).offset, 0u);
  Tensor s = rand({}, {}, &g);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  float x = s.data_ptr<float>()[0];
  EXPECT_TRUE(x >= 0.0f && x < 1.0f);
}

TEST_F(Random, RequiresGradOptionIsHonoured) {
  Generator g(15);
  EXPECT_TRUE(rand({3}, TensorOptions().requires_grad(), &g).requires_grad());
  EXPECT_TRUE(randn({3}, TensorOptions().requires_grad(), &g).requires_grad());
  EXPECT_FALSE(rand({3}, {}, &g).requires_grad());
}

}  // namespace
}  // namespace ember
