// nn::Linear: PyTorch's parameter shapes and default init bounds, forward against matmul,
// float64 gradcheck, bias=false, and the error for a wrong feature count.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "tests/nn/nn_test_util.h"

namespace ember::nn {
namespace {

using testing::all_close;
using testing::leaf;
using testing::randn_seeded;

TEST(Linear, ParametersHavePyTorchShapesAndDefaultInitBounds) {
  LinearImpl lin(50, 20);
  EXPECT_EQ(lin.weight.sizes(), (IntList{20, 50}));
  EXPECT_EQ(lin.bias.sizes(), (IntList{20}));
  EXPECT_TRUE(lin.weight.requires_grad());
  const double bound = 1.0 / std::sqrt(50.0);  // kaiming_uniform(a = sqrt(5)) == U(-1/sqrt(in), 1/sqrt(in))
  double sq = 0.0;
  for (float v : lin.weight.to_vector<float>()) {
    EXPECT_LE(std::abs(v), bound);
    sq += v * v;
  }
  // Var of U(-b, b) is b^2 / 3; 1000 samples put the estimate well within 15%.
  EXPECT_NEAR(sq / 1000.0, bound * bound / 3.0, 0.15 * bound * bound / 3.0);
  for (float v : lin.bias.to_vector<float>()) EXPECT_LE(std::abs(v), bound);
}

TEST(Linear, ForwardIsInputTimesWeightTransposedPlusBias) {
  LinearImpl lin(3, 2);
  Tensor x = randn_seeded({4, 3}, 1, kFloat32);
  Tensor expected = native::add(native::mm(x, native::t(lin.weight)), lin.bias);
  EXPECT_TRUE(all_close(lin.forward(x), expected, 1e-6, 1e-6));
  // Extra leading dims are flattened and restored.
  Tensor x3 = randn_seeded({2, 5, 3}, 2, kFloat32);
  EXPECT_EQ(lin.forward(x3).sizes(), (IntList{2, 5, 2}));
}

TEST(Linear, GradcheckInputWeightAndBiasFloat64) {
  LinearImpl lin(4, 3);
  lin.to(kFloat64);
  Tensor x = leaf(randn_seeded({2, 3, 4}, 3));
  auto r = autograd::gradcheck(
      [&](const autograd::TensorList& in) { return F::linear(in[0], in[1], in[2]); }, {x, lin.weight, lin.bias});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Linear, WithoutBias) {
  LinearImpl lin(3, 2, /*bias=*/false);
  EXPECT_FALSE(lin.bias.defined());
  EXPECT_EQ(lin.parameters().size(), 1u);
  Tensor x = randn_seeded({4, 3}, 4, kFloat32);
  EXPECT_TRUE(all_close(lin.forward(x), native::mm(x, native::t(lin.weight)), 1e-6, 1e-6));
}

TEST(Linear, WrongFeatureCountSaysWhatWasExpected) {
  LinearImpl lin(3, 2);
  std::string msg = testing::error_of([&] { lin.forward(ones({4, 5})); });
  EXPECT_NE(msg.find("linear: input has 5 features"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expects 3"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ember::nn
