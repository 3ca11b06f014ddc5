// clip_grad_norm_ (2-norm, 1-norm, inf-norm, no-op below max_norm, non-finite handling) and
// clip_grad_value_, against closed-form norms.
#include <gtest/gtest.h>

#include <cmath>

#include "nn/utils/clip_grad.h"
#include "tests/nn/nn_test_util.h"

namespace ember::nn::utils {
namespace {

using testing::error_of;
using testing::leaf;

std::vector<Tensor> params_with_grads(std::vector<std::vector<double>> grads) {
  std::vector<Tensor> out;
  for (auto& g : grads) {
    Tensor p = leaf(zeros({static_cast<int64_t>(g.size())}, TensorOptions(kFloat64)));
    p.set_grad(from_vector(g));
    out.push_back(p);
  }
  return out;
}

TEST(ClipGradNorm, ScalesByMaxNormOverTotalNorm) {
  auto ps = params_with_grads({{3, 0}, {0, 4}});  // total 2-norm 5
  double total = clip_grad_norm_(ps, 1.0);
  EXPECT_DOUBLE_EQ(total, 5.0);
  const double coef = 1.0 / (5.0 + 1e-6);
  EXPECT_NEAR(ps[0].grad().to_vector<double>()[0], 3 * coef, 1e-15);
  EXPECT_NEAR(ps[1].grad().to_vector<double>()[1], 4 * coef, 1e-15);
}

TEST(ClipGradNorm, LeavesSmallGradientsAndSkipsMissingOnes) {
  auto ps = params_with_grads({{0.3, 0.4}});
  ps.push_back(leaf(zeros({2})));  // no gradient
  EXPECT_NEAR(clip_grad_norm_(ps, 10.0), 0.5, 1e-15);
  EXPECT_EQ(ps[0].grad().to_vector<double>(), (std::vector<double>{0.3, 0.4}));
  EXPECT_EQ(clip_grad_norm_({leaf(zeros({1}))}, 1.0), 0.0);
}

TEST(ClipGradNorm, OneAndInfinityNorms) {
  auto ps = params_with_grads({{1, -2}, {3}});
  EXPECT_DOUBLE_EQ(clip_grad_norm_(ps, 100.0, 1.0), 6.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm_(ps, 100.0, INFINITY), 3.0);
  EXPECT_NEAR(clip_grad_norm_(ps, 100.0, 3.0), std::cbrt(1 + 8 + 27), 1e-12);
  clip_grad_norm_(ps, 1.5, INFINITY);
  EXPECT_NEAR(ps[1].grad().item(), 3 * 1.5 / (3 + 1e-6), 1e-12);
}

TEST(ClipGradNorm, NonFiniteNormErrorsOnlyWhenAsked) {
  auto ps = params_with_grads({{1, NAN}});
  std::string msg = error_of([&] { clip_grad_norm_(ps, 1.0, 2.0, true); });
  EXPECT_NE(msg.find("The total norm of order 2 for gradients from `parameters` is non-finite"), std::string::npos)
      << msg;
  EXPECT_EQ(ps[0].grad().to_vector<double>()[0], 1.0);  // untouched
  EXPECT_TRUE(std::isnan(clip_grad_norm_(ps, 1.0)));
}

TEST(ClipGradValue, ClampsEveryElement) {
  auto ps = params_with_grads({{-3, 0.5, 2}});
  clip_grad_value_(ps, 1.0);
  EXPECT_EQ(ps[0].grad().to_vector<double>(), (std::vector<double>{-1, 0.5, 1}));
}

}  // namespace
}  // namespace ember::nn::utils
