// clip_grad_norm_ (2-norm, 1-norm, inf-norm, no-op below max_norm, non-finite handling) and
// clip_grad_value_, against closed-form norms.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/ops.h"
#include "nn/container.h"
#include "nn/embedding.h"
#include "nn/linear.h"
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

// Regression (issue: tied input/output embeddings registered in both modules made
// clip_grad_norm_ count and scale that gradient twice, 0.127 instead of 0.5): the norm is the
// single-counted one and the gradient is scaled once, to exactly max_norm.
TEST(ClipGradNorm, TiedEmbeddingGradientIsCountedOnce) {
  Sequential net(std::make_shared<Embedding>(6, 4), std::make_shared<Linear>(4, 6, false));
  auto emb = std::dynamic_pointer_cast<Embedding>(net.children()[0]);
  auto dec = std::dynamic_pointer_cast<Linear>(net.children()[1]);
  dec->weight = emb->weight;
  *dec->find_parameter("weight") = emb->weight;
  Tensor ids = from_vector(std::vector<int64_t>{0, 3, 5, 3});
  Tensor logits = dec->forward(emb->forward(ids));
  sum(mul(logits, logits)).backward();
  Tensor g = emb->weight.grad();
  const double norm = std::sqrt(native::sum(native::mul(g, g), {}, false, kFloat64).item());
  ASSERT_GT(norm, 1.0);
  const double total = clip_grad_norm_(net.parameters(), 0.5);
  EXPECT_NEAR(total, norm, 1e-6 * norm);
  Tensor clipped = emb->weight.grad();
  const double after = std::sqrt(native::sum(native::mul(clipped, clipped), {}, false, kFloat64).item());
  EXPECT_NEAR(after, 0.5, 1e-5);
  // A list naming the tensor twice (a user's concatenation) is counted once as well.
  std::vector<Tensor> twice{emb->weight, dec->weight};
  EXPECT_NEAR(clip_grad_norm_(twice, 10.0), after, 1e-6);
}

TEST(ClipGradValue, ClampsEveryElement) {
  auto ps = params_with_grads({{-3, 0.5, 2}});
  clip_grad_value_(ps, 1.0);
  EXPECT_EQ(ps[0].grad().to_vector<double>(), (std::vector<double>{-1, 0.5, 1}));
}

}  // namespace
}  // namespace ember::nn::utils
