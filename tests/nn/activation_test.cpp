// ReLU / Tanh / Sigmoid / GELU modules: values against closed forms and float64 gradcheck,
// GELU's tanh approximation, and the approximate-argument error.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "autograd/gradcheck.h"
#include "nn/activation.h"
#include "tests/nn/nn_test_util.h"

namespace ember::nn {
namespace {

using testing::leaf;
using testing::randn_seeded;

TEST(Activation, ValuesMatchClosedForms) {
  Tensor x = randn_seeded({50}, 1);
  auto xv = x.to_vector<double>();
  auto relu = ReLUImpl().forward(x).to_vector<double>();
  auto th = TanhImpl().forward(x).to_vector<double>();
  auto sg = SigmoidImpl().forward(x).to_vector<double>();
  auto ge = GELUImpl().forward(x).to_vector<double>();
  auto gt = GELUImpl("tanh").forward(x).to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) {
    double v = xv[i];
    EXPECT_DOUBLE_EQ(relu[i], std::max(v, 0.0));
    EXPECT_NEAR(th[i], std::tanh(v), 1e-12);
    EXPECT_NEAR(sg[i], 1.0 / (1.0 + std::exp(-v)), 1e-12);
    EXPECT_NEAR(ge[i], 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))), 1e-12);
    EXPECT_NEAR(gt[i], 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v))), 1e-12);
  }
}

TEST(Activation, GradcheckFloat64) {
  Tensor x = leaf(randn_seeded({3, 4}, 2));
  auto check = [&](auto&& m) {
    auto r = autograd::gradcheck([&](const autograd::TensorList& in) { return m.forward(in[0]); }, {x});
    EXPECT_TRUE(r.ok) << m << ": " << r.message;
  };
  check(TanhImpl());
  check(SigmoidImpl());
  check(GELUImpl());
  check(GELUImpl("tanh"));
  check(ReLUImpl());
}

TEST(Activation, GeluRejectsUnknownApproximation) { EXPECT_THROW(GELUImpl("fast"), ValueError); }

}  // namespace
}  // namespace ember::nn
