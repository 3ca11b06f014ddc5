// clip_grad_norm_ (2-norm, 1-norm, inf-norm, no-op below max_norm, non-finite handling) and
// clip_grad_value_, against closed-form norms; the same norm and scaled gradients on 1 and on
// several threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/ops/random.h"
#include "core/thread_pool.h"
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
  SequentialImpl net(std::make_shared<EmbeddingImpl>(6, 4), std::make_shared<LinearImpl>(4, 6, false));
  auto emb = std::dynamic_pointer_cast<EmbeddingImpl>(net.children()[0]);
  auto dec = std::dynamic_pointer_cast<LinearImpl>(net.children()[1]);
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

// ---- one parallel pass over all gradients (Note [One pass over many tensors]) -----------------

// Gradients of mixed sizes: one above the pool's grain, many far below it, float64 ones that
// span several kNormChunk chunks, and a non-contiguous one. Seeded: equal on every call.
std::vector<Tensor> mixed_params() {
  manual_seed(7);
  std::vector<Tensor> ps;
  auto add = [&](const IntList& sizes, DType dt) {
    Tensor p = leaf(zeros(sizes, TensorOptions(dt)));
    p.set_grad(randn(sizes, TensorOptions(dt)));
    ps.push_back(p);
  };
  add({300000}, kFloat32);
  for (int i = 0; i < 40; ++i) add({1000 + i}, kFloat32);
  for (int i = 0; i < 10; ++i) add({70000}, kFloat64);
  Tensor t = leaf(zeros({7, 5}));
  t.set_grad(randn({5, 7}).transpose(0, 1));
  ps.push_back(t);
  return ps;
}

std::vector<double> all_values(const std::vector<Tensor>& ps) {
  std::vector<double> out;
  for (const Tensor& p : ps) {
    const std::vector<double> v = p.grad().to(kFloat64).contiguous().to_vector<double>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

class ThreadCountGuard {
 public:
  ThreadCountGuard() : saved_(get_num_threads()) {}
  ~ThreadCountGuard() { set_num_threads(saved_); }

 private:
  int saved_;
};

TEST(ClipGradNorm, SameNormAndGradientsBitForBitOnOneAndManyThreads) {
  ThreadCountGuard restore;
  for (double norm_type : {2.0, 1.0, 3.5, static_cast<double>(INFINITY)}) {
    SCOPED_TRACE("norm_type " + std::to_string(norm_type));
    set_num_threads(1);
    std::vector<Tensor> ps = mixed_params();
    // A plain double reference for the norm (the kernels accumulate float32 in float lanes).
    double ref = 0.0;
    for (double v : all_values(ps)) ref = std::isinf(norm_type) ? std::max(ref, std::abs(v)) : ref + std::pow(std::abs(v), norm_type);
    if (!std::isinf(norm_type)) ref = std::pow(ref, 1.0 / norm_type);
    const double total1 = clip_grad_norm_(ps, 0.5, norm_type);
    EXPECT_NEAR(total1, ref, 1e-6 * ref);
    const std::vector<double> scaled1 = all_values(ps);
    for (int threads : {2, 3, 4}) {
      set_num_threads(threads);
      std::vector<Tensor> qs = mixed_params();
      EXPECT_EQ(clip_grad_norm_(qs, 0.5, norm_type), total1) << threads << " threads";
      EXPECT_TRUE(all_values(qs) == scaled1) << threads << " threads scaled differently";
    }
  }
}

TEST(ClipGradNorm, ManyTinyGradientsAreEachCountedAndScaledOnce) {
  ThreadCountGuard restore;
  set_num_threads(4);
  // 3000 gradients of 100 ones: far more tensors than threads, each below one chunk; the
  // elements together (300,000) are split over the pool.
  std::vector<Tensor> ps;
  for (int i = 0; i < 3000; ++i) {
    Tensor p = leaf(zeros({100}));
    p.set_grad(ones({100}));
    ps.push_back(p);
  }
  const double total = clip_grad_norm_(ps, 1.0);
  EXPECT_DOUBLE_EQ(total, std::sqrt(300000.0));
  const float expected = static_cast<float>(1.0 / (std::sqrt(300000.0) + 1e-6));
  for (size_t i = 0; i < ps.size(); ++i) {
    const std::vector<float> g = ps[i].grad().to_vector<float>();
    ASSERT_TRUE(std::all_of(g.begin(), g.end(), [&](float v) { return v == expected; })) << "gradient " << i;
  }
}

TEST(ClipGradNorm, NonFiniteGradientAmongManyIsFoundOnAnyThreadCount) {
  ThreadCountGuard restore;
  for (int threads : {1, 4}) {
    set_num_threads(threads);
    std::vector<Tensor> ps = mixed_params();
    Tensor g = ps[20].grad();
    g.fill_(INFINITY);  // a small gradient in the middle of the list
    EXPECT_FALSE(error_of([&] { clip_grad_norm_(ps, 1.0, 2.0, true); }).empty()) << threads << " threads";
    EXPECT_TRUE(std::isinf(clip_grad_norm_(ps, 1.0, INFINITY)));
    ps[30].grad().fill_(NAN);
    EXPECT_TRUE(std::isnan(clip_grad_norm_(ps, 1.0))) << threads << " threads";
  }
}

TEST(ClipGradValue, ClampsEveryElement) {
  auto ps = params_with_grads({{-3, 0.5, 2}});
  clip_grad_value_(ps, 1.0);
  EXPECT_EQ(ps[0].grad().to_vector<double>(), (std::vector<double>{-1, 0.5, 1}));
}

}  // namespace
}  // namespace ember::nn::utils
