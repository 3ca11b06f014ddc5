// nn::init: gains, fans, the bounds and spreads of every initializer, orthogonality, seeded
// generators, and SkipInitGuard (nothing drawn, nothing written).
#include <gtest/gtest.h>

#include <cmath>

#include "core/ops/native.h"
#include "nn/init.h"
#include "nn/module.h"
#include "tests/nn/nn_test_util.h"

namespace ember::nn {
namespace {

using testing::bit_equal;

double mean_of(const Tensor& t) {
  double s = 0;
  auto v = t.to_vector<double>();
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}
double std_of(const Tensor& t) {
  double m = mean_of(t), s = 0;
  auto v = t.to_vector<double>();
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}
double max_abs(const Tensor& t) {
  double m = 0;
  for (double x : t.to_vector<double>()) m = std::max(m, std::abs(x));
  return m;
}

TEST(Init, CalculateGainMatchesPyTorch) {
  EXPECT_EQ(init::calculate_gain("linear"), 1.0);
  EXPECT_EQ(init::calculate_gain("conv2d"), 1.0);
  EXPECT_EQ(init::calculate_gain("sigmoid"), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("tanh"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu"), std::sqrt(2.0 / (1 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(2.0 / 6.0));
  EXPECT_EQ(init::calculate_gain("selu"), 0.75);
  EXPECT_NE(testing::error_of([] { init::calculate_gain("swish"); }).find("Unsupported nonlinearity swish"),
            std::string::npos);
}

TEST(Init, FansCountTheReceptiveField) {
  EXPECT_EQ(init::calculate_fan_in_and_fan_out(empty({4, 3})), (std::pair<int64_t, int64_t>{3, 4}));
  EXPECT_EQ(init::calculate_fan_in_and_fan_out(empty({8, 2, 3, 5})), (std::pair<int64_t, int64_t>{30, 120}));
  EXPECT_THROW(init::calculate_fan_in_and_fan_out(empty({4})), ValueError);
}

TEST(Init, UniformNormalConstant) {
  Tensor t = empty({100, 100});
  init::uniform_(t, -2.0, 3.0);
  auto v = t.to_vector<double>();
  EXPECT_GE(*std::min_element(v.begin(), v.end()), -2.0);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 3.0);
  EXPECT_NEAR(mean_of(t), 0.5, 0.05);
  init::normal_(t, 1.0, 0.5);
  EXPECT_NEAR(mean_of(t), 1.0, 0.02);
  EXPECT_NEAR(std_of(t), 0.5, 0.02);
  init::constant_(t, 0.25);
  EXPECT_EQ(mean_of(t), 0.25);
  init::ones_(t);
  EXPECT_EQ(max_abs(t), 1.0);
  init::zeros_(t);
  EXPECT_EQ(max_abs(t), 0.0);
  Tensor e = empty({2, 3});
  init::eye_(e);
  EXPECT_EQ(e.to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0}));
}

TEST(Init, XavierAndKaimingHaveTheirBoundsAndSpreads) {
  Tensor t = empty({200, 300});
  init::xavier_uniform_(t, 2.0);
  const double a = 2.0 * std::sqrt(6.0 / 500.0);
  EXPECT_LE(max_abs(t), a);
  EXPECT_NEAR(std_of(t), a / std::sqrt(3.0), 0.02 * a);
  init::xavier_normal_(t);
  EXPECT_NEAR(std_of(t), std::sqrt(2.0 / 500.0), 0.02 * std::sqrt(2.0 / 500.0));
  init::kaiming_uniform_(t, 0.0, "fan_in", "relu");
  const double bound = std::sqrt(2.0) * std::sqrt(3.0 / 300.0);
  EXPECT_LE(max_abs(t), bound);
  EXPECT_GT(max_abs(t), 0.99 * bound);
  init::kaiming_normal_(t, 0.0, "fan_out", "relu");
  EXPECT_NEAR(std_of(t), std::sqrt(2.0 / 200.0), 0.02 * std::sqrt(2.0 / 200.0));
  EXPECT_THROW(init::kaiming_normal_(t, 0.0, "fan_avg"), ValueError);
}

TEST(Init, OrthogonalRowsOrColumnsAreOrthonormal) {
  for (IntList sizes : {IntList{6, 4}, IntList{4, 6}, IntList{3, 2, 2}}) {
    Tensor t = empty(sizes, TensorOptions(kFloat64));
    init::orthogonal_(t, 1.5);
    Tensor q = native::reshape(t, {sizes[0], -1});
    // The shorter side is orthonormal (times gain): Q^T Q or Q Q^T = gain^2 * I.
    bool tall = q.sizes()[0] >= q.sizes()[1];
    Tensor g = tall ? native::mm(native::t(q), q) : native::mm(q, native::t(q));
    int64_t n = g.sizes()[0];
    auto gv = g.to_vector<double>();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) EXPECT_NEAR(gv[i * n + j], i == j ? 2.25 : 0.0, 1e-12);
    }
  }
  Tensor v = empty({3});
  EXPECT_THROW(init::orthogonal_(v, 1.0), ValueError);
}

TEST(Init, SeededGeneratorsReproduceAndSkipInitGuardDoesNothing) {
  Generator g1(5), g2(5);
  Tensor a = empty({10, 10}), b = empty({10, 10});
  init::kaiming_uniform_(a, std::sqrt(5.0), "fan_in", "leaky_relu", &g1);
  init::kaiming_uniform_(b, std::sqrt(5.0), "fan_in", "leaky_relu", &g2);
  EXPECT_TRUE(bit_equal(a, b));
  Tensor before = native::clone(a);
  auto state = default_generator().get_state();
  {
    detail::SkipInitGuard skip;
    init::normal_(a);
    init::xavier_uniform_(a);
    init::orthogonal_(a);
    init::zeros_(a);
    init::kaiming_normal_(a);
  }
  EXPECT_TRUE(bit_equal(a, before));
  EXPECT_EQ(default_generator().get_state(), state);
}

}  // namespace
}  // namespace ember::nn
