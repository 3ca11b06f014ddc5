// The exact fixed-point sums (Note [Fixed-point gradient sums] in core/kernels/fixed_point.h):
// the integer sum is independent of the order and grouping of the terms and of the thread
// count, where the float sum is not; the result is the real sum within the Note's bound; the
// worst case of the exponent rule does not overflow; NaN/Inf and bad arguments are errors; the
// CUDA launch of the same functors (emulated) gives the CPU driver's bits. Also the
// deterministic-algorithms switch (core/deterministic.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/deterministic.h"
#include "core/error.h"
#include "core/kernels/fixed_point.h"
#include "core/kernels/launch.h"
#include "core/ops/factory.h"
#include "core/ops/fixed_point.h"
#include "core/ops/native.h"
#include "core/thread_pool.h"
#include "tests/support/error_text.h"

namespace ember {
namespace {

// n float32 terms spanning many binades, with both signs (the float sum of them is order-sensitive).
std::vector<std::vector<float>> make_terms(int count, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-30, 10);
  std::vector<std::vector<float>> t(static_cast<size_t>(count), std::vector<float>(static_cast<size_t>(n)));
  for (auto& v : t)
    for (auto& x : v) x = std::ldexp(mant(rng), ex(rng));
  return t;
}

Tensor as_tensor(const std::vector<float>& v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }

double max_abs_of(const std::vector<std::vector<float>>& terms) {
  double m = 0.0;
  for (const auto& v : terms) m = std::max(m, native::fixed_point_max_abs(as_tensor(v)));
  return m;
}

// Sum of terms[order[k]], grouped into accumulators of `group` terms each, the groups' integers
// then added in reverse: a stand-in for ranks holding different shard ranges.
std::vector<float> fixed_sum(const std::vector<std::vector<float>>& terms, const std::vector<size_t>& order,
                             size_t group, int exponent, double divisor) {
  const int64_t n = static_cast<int64_t>(terms[0].size());
  std::vector<Tensor> accs;
  for (size_t k = 0; k < order.size(); ++k) {
    if (k % group == 0) accs.push_back(zeros({n}, TensorOptions(kInt64)));
    native::fixed_point_accumulate_(accs.back(), as_tensor(terms[order[k]]), exponent);
  }
  std::vector<int64_t> total(static_cast<size_t>(n), 0);
  for (auto it = accs.rbegin(); it != accs.rend(); ++it) {
    const auto v = it->to_vector<int64_t>();
    for (int64_t i = 0; i < n; ++i) total[static_cast<size_t>(i)] += v[static_cast<size_t>(i)];
  }
  Tensor out = empty({n}, TensorOptions(kFloat32));
  native::fixed_point_to_float_(out, from_vector(total, {n}), exponent, divisor);
  return out.to_vector<float>();
}

TEST(FixedPointSum, BitIdenticalForEveryOrderAndGroupingWhereFloatSumsDiffer) {
  const int S = 8;
  const auto terms = make_terms(S, 4099, 7);
  const int e = native::fixed_point_exponent(max_abs_of(terms), S);
  std::vector<size_t> order(S);
  std::iota(order.begin(), order.end(), 0);
  const std::vector<float> ref = fixed_sum(terms, order, S, e, S);
  std::mt19937 rng(3);
  bool float_sums_differ = false;
  for (int trial = 0; trial < 12; ++trial) {
    std::shuffle(order.begin(), order.end(), rng);
    const size_t group = 1 + static_cast<size_t>(trial % 4);  // 1, 2, 3, 4 terms per "rank"
    const std::vector<float> got = fixed_sum(terms, order, group, e, S);
    ASSERT_EQ(0, std::memcmp(ref.data(), got.data(), ref.size() * sizeof(float))) << "trial " << trial;
    for (size_t i = 0; i < ref.size() && !float_sums_differ; ++i) {
      float a = 0.0f, b = 0.0f;
      for (int k = 0; k < S; ++k) a += terms[static_cast<size_t>(k)][i];
      for (size_t k = 0; k < order.size(); ++k) b += terms[order[k]][i];
      float_sums_differ = a != b;
    }
  }
  EXPECT_TRUE(float_sums_differ) << "the terms should make plain float sums order-dependent";
}

TEST(FixedPointSum, CloseToTheRealMean) {
  const int S = 5;
  const auto terms = make_terms(S, 2000, 11);
  const double m = max_abs_of(terms);
  const int e = native::fixed_point_exponent(m, S);
  std::vector<size_t> order(S);
  std::iota(order.begin(), order.end(), 0);
  const std::vector<float> got = fixed_sum(terms, order, 2, e, S);
  for (size_t i = 0; i < got.size(); ++i) {
    long double exact = 0;
    for (int k = 0; k < S; ++k) exact += terms[static_cast<size_t>(k)][i];
    exact /= S;
    // Rounding to 2^-e per term (S/2 units) plus the final float rounding.
    const double tol = S * std::ldexp(1.0, -e) + std::fabs(static_cast<double>(exact)) * 1.2e-7;
    ASSERT_NEAR(static_cast<double>(exact), got[i], tol) << i;
  }
}

TEST(FixedPointSum, ExactForDyadicTerms) {
  // Terms that are multiples of 2^-e sum exactly: 0.75 + 0.5 - 0.125 ... with no rounding at all.
  std::vector<std::vector<float>> terms = {{0.75f, -1.5f, 3.0f}, {0.5f, 0.25f, -3.0f}, {-0.125f, 1.0f, 0.0f}};
  const int e = native::fixed_point_exponent(3.0, 3);
  const std::vector<float> got = fixed_sum(terms, {2, 0, 1}, 1, e, 1.0);
  EXPECT_EQ(got, (std::vector<float>{1.125f, -0.25f, 0.0f}));
}

TEST(FixedPointSum, WorstCaseDoesNotOverflow) {
  // S terms all at the largest magnitude allowed for the exponent (just under 2^k), same sign.
  for (int S : {1, 2, 3, 8, 1000}) {
    const float big = std::nextafter(8.0f, 0.0f);
    std::vector<std::vector<float>> terms(static_cast<size_t>(S), std::vector<float>{big, -big, 1.0f});
    const int e = native::fixed_point_exponent(big, S);
    std::vector<size_t> order(static_cast<size_t>(S));
    std::iota(order.begin(), order.end(), 0);
    const std::vector<float> got = fixed_sum(terms, order, 1, e, S);
    EXPECT_EQ(got[0], big) << S;
    EXPECT_EQ(got[1], -big) << S;
    EXPECT_EQ(got[2], 1.0f) << S;
  }
}

TEST(FixedPointSum, ThreadCountDoesNotChangeBits) {
  const auto terms = make_terms(3, 200003, 5);
  const int e = native::fixed_point_exponent(max_abs_of(terms), 3);
  const int before = get_num_threads();
  set_num_threads(1);
  const auto one = fixed_sum(terms, {0, 1, 2}, 3, e, 3);
  set_num_threads(2);
  const auto two = fixed_sum(terms, {0, 1, 2}, 3, e, 3);
  set_num_threads(before);
  EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float)));
}

TEST(FixedPointSum, NonFiniteTermsGiveAnInfiniteMaxAndExponentRefusesIt) {
  EXPECT_EQ(native::fixed_point_max_abs(tensor({1.0, -4.0, 2.0})), 4.0);
  EXPECT_EQ(native::fixed_point_max_abs(empty({0})), 0.0);
  EXPECT_TRUE(std::isinf(native::fixed_point_max_abs(tensor({1.0, NAN}))));
  EXPECT_TRUE(std::isinf(native::fixed_point_max_abs(tensor({-INFINITY, 0.0}, TensorOptions(kFloat64)))));
  EXPECT_THROW(native::fixed_point_exponent(INFINITY, 2), ValueError);
  EXPECT_THROW(native::fixed_point_exponent(NAN, 2), ValueError);
  EXPECT_THROW(native::fixed_point_exponent(1.0, 0), ValueError);
  EXPECT_EQ(native::fixed_point_exponent(0.0, 4), 0);
}

TEST(FixedPointSum, FloatSixtyFourTinyValuesUseLdexp) {
  // max |x| ~ 2^-1000: the exponent is beyond the range of a double factor.
  const double tiny = std::ldexp(1.0, -1000);
  Tensor x = tensor({tiny, -tiny / 2}, TensorOptions(kFloat64));
  const int e = native::fixed_point_exponent(tiny, 2);
  EXPECT_GT(e, kernels::kFixedPointMaxExponent);
  Tensor acc = zeros({2}, TensorOptions(kInt64));
  native::fixed_point_accumulate_(acc, x, e);
  native::fixed_point_accumulate_(acc, x, e);
  Tensor out = empty({2}, TensorOptions(kFloat64));
  native::fixed_point_to_float_(out, acc, e, 2.0);
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{tiny, -tiny / 2}));
}

TEST(FixedPointSum, BadArgumentsAreTypedErrors) {
  Tensor acc = zeros({3}, TensorOptions(kInt64));
  EXPECT_THROW(native::fixed_point_accumulate_(acc, zeros({3}, TensorOptions(kInt32)), 0), TypeError);
  EXPECT_THROW(native::fixed_point_accumulate_(zeros({4}, TensorOptions(kInt64)), zeros({3}), 0), ValueError);
  EXPECT_THROW(native::fixed_point_accumulate_(zeros({3}), zeros({3}), 0), TypeError);
  EXPECT_THROW(native::fixed_point_to_float_(zeros({3}), acc, 0, 0.0), ValueError);
  EXPECT_THROW(native::fixed_point_max_abs(zeros({3}, TensorOptions(kInt64))), TypeError);
}

// The accumulator and the float tensor must share a device (the kernels take raw pointers of one
// device); a mismatch is a DeviceError naming both, before anything is written.
TEST(FixedPointSum, AccumulatorOnAnotherDeviceIsADeviceError) {
  Tensor acc = zeros({3}, TensorOptions(kInt64).device(Device::cpu(1)));
  const std::string what = support::error_of<DeviceError>([&] { native::fixed_point_accumulate_(acc, tensor({1.0f, 2.0f, 3.0f}), 0); });
  EXPECT_NE(what.find("the accumulator is on cpu:1 and the float tensor on cpu:0"), std::string::npos) << what;
  EXPECT_EQ(acc.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
  Tensor out = empty({3}, TensorOptions(kFloat32).device(Device::cpu(2)));
  EXPECT_THROW(native::fixed_point_to_float_(out, acc, 0, 1.0), DeviceError);
  // On one logical device other than cpu:0 the CPU kernel runs.
  Tensor x = native::to(tensor({1.5f, -2.5f, 3.0f}), Device::cpu(1));
  native::fixed_point_accumulate_(acc, x, 1);
  EXPECT_EQ(acc.to_vector<int64_t>(), (std::vector<int64_t>{3, -5, 6}));
  EXPECT_EQ(native::fixed_point_max_abs(x), 3.0);
}

TEST(FixedPointSum, RoundHalfEvenIsNearbyint) {
  std::vector<double> xs = {0.0, -0.0, 0.5, 1.5, 2.5, -2.5, -0.5, 3.4999999999999996, 1e-300, -1e-310,
                            4503599627370495.5, 4503599627370496.0, 4503599627370497.0, 2251799813685247.5,
                            -9007199254740993.0, 4.6e18, -4.6e18, 1e300};
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> ints(-(int64_t{1} << 53), int64_t{1} << 53);
  std::uniform_real_distribution<double> real(-1e6, 1e6);
  for (int i = 0; i < 20000; ++i) {
    xs.push_back(static_cast<double>(ints(rng)) + 0.5);  // ties (exact below 2^52)
    xs.push_back(real(rng));
  }
  for (double x : xs) {
    const double r = kernels::round_half_even(x), ref = std::nearbyint(x);
    ASSERT_EQ(0, std::memcmp(&r, &ref, sizeof r)) << x;
  }
}

// The CPU driver's vectorized loops against the functors run one element at a time, for float32
// and float64, with ties, NaN and +-0 among the terms.
TEST(FixedPointSum, CpuDriverMatchesTheFunctors) {
  const int64_t n = 70001;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = u(rng);
  x[5] = 0.5f;  // ties at exponent 0
  x[6] = -2.5f;
  x[7] = -0.0f;
  const Tensor t = from_vector(x, {n});
  for (int e : {0, 1, 20, 59}) {
    Tensor acc = zeros({n}, TensorOptions(kInt64));
    native::fixed_point_accumulate_(acc, t, e);
    std::vector<int64_t> ref(static_cast<size_t>(n), 0);
    const kernels::FixedPointAccumulateF<float> f{x.data(), ref.data(), kernels::make_pow2_scale(e)};
    for (int64_t i = 0; i < n; ++i) f(i);
    ASSERT_EQ(acc.to_vector<int64_t>(), ref) << e;
    Tensor out = empty({n});
    native::fixed_point_to_float_(out, acc, e, 3.0);
    std::vector<float> want(static_cast<size_t>(n));
    const kernels::FixedPointToFloatF<float> g{ref.data(), want.data(), kernels::make_pow2_scale(-e), 3.0};
    for (int64_t i = 0; i < n; ++i) g(i);
    const auto got = out.to_vector<float>();
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float))) << e;
  }
  const kernels::FixedPointAbsF<float> abs;
  double m = 0;
  for (float v : x) m = std::max(m, abs(v));
  EXPECT_EQ(native::fixed_point_max_abs(t), m);
  x[n - 2] = NAN;
  EXPECT_EQ(native::fixed_point_max_abs(from_vector(x, {n})), INFINITY);
  std::vector<double> d(1000, -1.0);
  d[999] = -INFINITY;
  EXPECT_EQ(native::fixed_point_max_abs(from_vector(d, {1000})), INFINITY);
  d[999] = -7.25;
  EXPECT_EQ(native::fixed_point_max_abs(from_vector(d, {1000})), 7.25);
}

TEST(FixedPointSum, EmulatedLaunchMatchesCpuDriver) {
  const auto terms = make_terms(2, 1000, 9);
  const int e = native::fixed_point_exponent(max_abs_of(terms), 2);
  const auto cpu = fixed_sum(terms, {0, 1}, 2, e, 2);
  for (unsigned threads : {32u, 256u}) {
    for (int64_t max_blocks : {int64_t{1}, int64_t{3}, kernels::kMaxLaunchBlocks}) {
      std::vector<int64_t> acc(1000, 0);
      for (const auto& t : terms) {
        const kernels::FixedPointAccumulateF<float> f{t.data(), acc.data(), kernels::make_pow2_scale(e)};
        kernels::emulate_launch(kernels::launch_config_1d("fixed_point_accumulate", 1000, threads, max_blocks),
                                kernels::element_kernel(f, 1000));
      }
      std::vector<float> out(1000);
      const kernels::FixedPointToFloatF<float> g{acc.data(), out.data(), kernels::make_pow2_scale(-e), 2.0};
      kernels::emulate_launch(kernels::launch_config_1d("fixed_point_to_float", 1000, threads, max_blocks),
                              kernels::element_kernel(g, 1000));
      ASSERT_EQ(0, std::memcmp(cpu.data(), out.data(), out.size() * sizeof(float))) << threads << " " << max_blocks;
    }
  }
}

TEST(DeterministicAlgorithms, SwitchAndAlert) {
  EXPECT_FALSE(are_deterministic_algorithms_enabled());
  EXPECT_NO_THROW(alert_not_deterministic("some_op"));
  {
    DeterministicAlgorithmsGuard on(true);
    EXPECT_TRUE(are_deterministic_algorithms_enabled());
    EXPECT_FALSE(is_deterministic_algorithms_warn_only_enabled());
    const std::string what = support::error_of<NotImplementedError>([] { alert_not_deterministic("index_add_ (CUDA)"); });
    EXPECT_NE(what.find("index_add_ (CUDA) does not have a deterministic implementation"), std::string::npos) << what;
    DeterministicAlgorithmsGuard warn(true, true);
    EXPECT_TRUE(is_deterministic_algorithms_warn_only_enabled());
    EXPECT_NO_THROW(alert_not_deterministic("index_add_ (CUDA)"));
  }
  EXPECT_FALSE(are_deterministic_algorithms_enabled());
}

}  // namespace
}  // namespace ember
