// Losses: cross_entropy / nll_loss (fused CPU kernels against the composite reference over
// layouts, weights, ignore_index, label smoothing and reductions; PyTorch's weighted-mean
// definition; gradcheck), mse_loss, binary_cross_entropy_with_logits (stability, pos_weight),
// class-probability targets, the loss modules, and errors in PyTorch's words.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/thread_pool.h"
#include "nn/layer_norm.h"
#include "nn/loss.h"
#include "tests/nn/nn_test_util.h"

namespace ember::nn {
namespace {

using F::Reduction;
using testing::all_close;
using testing::error_of;
using testing::leaf;
using testing::randn_seeded;

Tensor targets(std::vector<int64_t> v, IntList sizes) { return from_vector(v, sizes); }

TEST(CrossEntropy, MatchesHandComputedWeightedMeanOverNonIgnored) {
  // Two classes of three rows; row 1 is ignored. mean = sum(w[t] * (lse - x_t)) / sum(w[t]).
  Tensor x = from_vector(std::vector<double>{1, 2, 0.5, 0, 0, 0, -1, 3, 2}, {3, 3});
  Tensor t = targets({2, -100, 0}, {3});
  Tensor w = from_vector(std::vector<double>{0.2, 1.0, 3.0}, {3});
  auto lse = [](double a, double b, double c) { return std::log(std::exp(a) + std::exp(b) + std::exp(c)); };
  double l0 = 3.0 * (lse(1, 2, 0.5) - 0.5), l2 = 0.2 * (lse(-1, 3, 2) - (-1));
  Tensor mean = F::cross_entropy(x, t, {.weight = w});
  EXPECT_NEAR(mean.item(), (l0 + l2) / 3.2, 1e-12);
  Tensor sum_l = F::cross_entropy(x, t, {.weight = w, .reduction = Reduction::Sum});
  EXPECT_NEAR(sum_l.item(), l0 + l2, 1e-12);
  auto none = F::cross_entropy(x, t, {.weight = w, .reduction = Reduction::None}).to_vector<double>();
  EXPECT_NEAR(none[0], l0, 1e-12);
  EXPECT_EQ(none[1], 0.0);
  EXPECT_NEAR(none[2], l2, 1e-12);
}

TEST(CrossEntropy, LabelSmoothingMatchesItsDefinition) {
  // (1 - ls) * nll + ls / C * sum_c (lse - x_c), averaged over non-ignored rows.
  Tensor x = randn_seeded({4, 5}, 1);
  Tensor t = targets({1, 4, -100, 0}, {4});
  const double ls = 0.3;
  auto xv = x.to_vector<double>();
  std::vector<int64_t> tv{1, 4, -100, 0};
  double total = 0;
  for (int r = 0; r < 4; ++r) {
    if (tv[r] < 0) continue;
    double s = 0;
    for (int c = 0; c < 5; ++c) s += std::exp(xv[r * 5 + c]);
    double lse = std::log(s), smooth = 0;
    for (int c = 0; c < 5; ++c) smooth += lse - xv[r * 5 + c];
    total += (1 - ls) * (lse - xv[r * 5 + tv[r]]) + ls / 5 * smooth;
  }
  EXPECT_NEAR(F::cross_entropy(x, t, {.label_smoothing = ls}).item(), total / 3, 1e-12);
}

struct LossCase {
  IntList input_sizes;
  bool weight;
  int64_t ignore_index;
  double label_smoothing;
  Reduction reduction;
};

std::vector<LossCase> loss_cases() {
  std::vector<LossCase> out;
  for (IntList sizes : {IntList{6, 4}, IntList{3, 4, 2, 3}, IntList{4}}) {
    for (bool w : {false, true}) {
      for (int64_t ig : {int64_t{-100}, int64_t{1}}) {
        for (double ls : {0.0, 0.2}) {
          for (Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) out.push_back({sizes, w, ig, ls, r});
        }
      }
    }
  }
  return out;
}

Tensor make_targets(const IntList& input_sizes, uint64_t seed) {
  IntList ts;
  if (input_sizes.size() > 1) {
    ts.push_back(input_sizes[0]);
    ts.insert(ts.end(), input_sizes.begin() + 2, input_sizes.end());
  }
  const int64_t C = input_sizes.size() > 1 ? input_sizes[1] : input_sizes[0];
  Generator g(seed);
  return randint(0, C, ts, TensorOptions(kInt64), &g);
}

TEST(ClassLoss, FusedKernelsMatchCompositeReference) {
  for (DType dt : {kFloat32, kFloat64}) {
    uint64_t seed = 10;
    for (const auto& c : loss_cases()) {
      ++seed;
      const int64_t C = c.input_sizes.size() > 1 ? c.input_sizes[1] : c.input_sizes[0];
      Tensor x1 = leaf(randn_seeded(c.input_sizes, seed, dt)), x2 = leaf(x1);
      Tensor t = make_targets(c.input_sizes, seed);
      Tensor w = c.weight ? native::to(native::add(native::abs(randn_seeded({C}, seed + 1000, dt)), 0.1), dt) : Tensor();
      F::CrossEntropyOptions o{.weight = w, .ignore_index = c.ignore_index, .reduction = c.reduction,
                               .label_smoothing = c.label_smoothing};
      Tensor a = F::cross_entropy(x1, t, o), b = F::detail::cross_entropy_reference(x2, t, o);
      const double tol = dt == kFloat32 ? 2e-5 : 1e-12;
      std::string what = std::string("cross_entropy ") + F::reduction_name(c.reduction) +
                         " ls=" + std::to_string(c.label_smoothing) + " ignore=" + std::to_string(c.ignore_index) +
                         " weight=" + std::to_string(c.weight) + " dims=" + std::to_string(c.input_sizes.size());
      ASSERT_TRUE(all_close(a, b, tol, tol)) << what;
      Tensor up = randn_seeded(a.sizes(), seed + 2000, dt);
      sum(mul(a, up)).backward();
      sum(mul(b, up)).backward();
      ASSERT_TRUE(all_close(x1.grad(), x2.grad(), tol, tol)) << what;
      if (c.label_smoothing == 0.0) {
        Tensor lp1 = leaf(native::log_softmax(x1, x1.dim() == 1 ? 0 : 1)), lp2 = leaf(lp1);
        F::NLLLossOptions no{.weight = w, .ignore_index = c.ignore_index, .reduction = c.reduction};
        Tensor na = F::nll_loss(lp1, t, no), nb = F::detail::nll_loss_reference(lp2, t, no);
        ASSERT_TRUE(all_close(na, nb, tol, tol)) << "nll " << what;
        sum(mul(na, up)).backward();
        sum(mul(nb, up)).backward();
        ASSERT_TRUE(all_close(lp1.grad(), lp2.grad(), tol, tol)) << "nll " << what;
      }
    }
  }
}

TEST(ClassLoss, GradcheckFloat64) {
  Tensor x = leaf(randn_seeded({3, 4, 2}, 5));
  Tensor t = targets({0, 3, 1, 1, 2, 3}, {3, 2});
  Tensor w = from_vector(std::vector<double>{0.5, 1.0, 2.0, 1.5}, {4});
  for (Reduction r : {Reduction::None, Reduction::Mean, Reduction::Sum}) {
    F::CrossEntropyOptions o{.weight = w, .ignore_index = 1, .reduction = r, .label_smoothing = 0.1};
    auto res = autograd::gradcheck([&](const autograd::TensorList& in) { return F::cross_entropy(in[0], t, o); }, {x});
    EXPECT_TRUE(res.ok) << F::reduction_name(r) << ": " << res.message;
    F::NLLLossOptions no{.weight = w, .ignore_index = 3, .reduction = r};
    auto res2 = autograd::gradcheck([&](const autograd::TensorList& in) { return F::nll_loss(in[0], t, no); }, {x});
    EXPECT_TRUE(res2.ok) << F::reduction_name(r) << ": " << res2.message;
  }
}

TEST(ClassLoss, AllIgnoredMeanIsNaN) {
  Tensor x = randn_seeded({2, 3}, 6);
  Tensor t = targets({-100, -100}, {2});
  EXPECT_TRUE(std::isnan(F::cross_entropy(x, t).item()));
  EXPECT_EQ(F::cross_entropy(x, t, {.reduction = Reduction::Sum}).item(), 0.0);
}

TEST(ClassLoss, EmptyBatch) {
  Tensor x = leaf(zeros({0, 3}));
  Tensor t = zeros({0}, TensorOptions(kInt64));
  EXPECT_TRUE(std::isnan(F::cross_entropy(x, t).item()));
  Tensor s = F::cross_entropy(x, t, {.reduction = Reduction::Sum});
  EXPECT_EQ(s.item(), 0.0);
  s.backward();
  EXPECT_EQ(x.grad().sizes(), (IntList{0, 3}));
}

// Fused kernels split rows over the thread pool; their results must not depend on how.
TEST(ClassLoss, ResultsDoNotDependOnTheThreadCount) {
  const int before = get_num_threads();
  auto run = [](int threads) {
    set_num_threads(threads);
    Tensor x = leaf(randn_seeded({4096, 33}, 21, kFloat32));
    Tensor t = make_targets({4096, 33}, 22);
    Tensor loss = F::cross_entropy(x, t, {.label_smoothing = 0.1});
    loss.backward();
    Tensor y = leaf(randn_seeded({1000, 70}, 23, kFloat32));
    LayerNormImpl ln({70});
    Tensor out = ln.forward(y);
    sum(mul(out, out)).backward();
    return std::vector<Tensor>{loss, x.grad(), out, y.grad(), ln.weight.grad(), ln.bias.grad()};
  };
  auto one = run(1), four = run(4);
  set_num_threads(before);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(testing::bit_equal(one[i], four[i])) << i;
}

TEST(ClassLoss, ExtremeLogitsMatchTheReference) {
  // Large spreads and -inf (masked) logits through the float32 fast-exp rows.
  Tensor x1 = leaf(from_vector(std::vector<float>{1000, -1000, 0, 5, -INFINITY, 2, -90, -95, -100}, {3, 3}));
  Tensor x2 = leaf(x1);
  Tensor t = targets({0, 2, 0}, {3});
  Tensor a = F::cross_entropy(x1, t, {.reduction = Reduction::None});
  Tensor b = F::detail::cross_entropy_reference(x2, t, {.reduction = Reduction::None});
  EXPECT_TRUE(all_close(a, b, 1e-6, 1e-6));
  sum(a).backward();
  sum(b).backward();
  EXPECT_TRUE(all_close(x1.grad(), x2.grad(), 1e-6, 1e-6));
}

TEST(ClassLoss, ErrorsInPyTorchWords) {
  Tensor x = randn_seeded({3, 4}, 7);
  EXPECT_NE(error_of([&] { F::cross_entropy(x, targets({0, 1}, {2})); })
                .find("Expected input batch_size (3) to match target batch_size (2)."),
            std::string::npos);
  std::string oob = error_of([&] { F::cross_entropy(x, targets({0, 4, 1}, {3})); });
  EXPECT_NE(oob.find("Target 4 is out of bounds."), std::string::npos) << oob;
  EXPECT_THROW(F::nll_loss(x, targets({0, -1, 1}, {3})), IndexError);
  EXPECT_NE(error_of([&] { F::cross_entropy(x, targets({0, 1, 1}, {3}), {.weight = ones({3})}); })
                .find("weight tensor should be defined either for all 4 classes or no classes but got weight tensor "
                      "of shape: [3]"),
            std::string::npos);
  Tensor x4 = randn_seeded({2, 4, 3}, 8);
  EXPECT_NE(error_of([&] { F::cross_entropy(x4, targets({0, 1, 2, 3}, {2, 2})); })
                .find("Expected target size [2, 3], got [2, 2]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { F::cross_entropy(x, targets({0, 1, 1}, {3}), {.label_smoothing = 1.5}); })
                .find("label_smoothing must be between 0.0 and 1.0. Got: 1.5"),
            std::string::npos);
  EXPECT_THROW(F::cross_entropy(x, ones({3})), TypeError);
}

TEST(CrossEntropy, ProbabilityTargets) {
  Tensor x = leaf(randn_seeded({3, 4}, 9));
  Tensor p = native::softmax(randn_seeded({3, 4}, 10), 1);
  Tensor lp = native::log_softmax(x, 1);
  double expected = -native::sum(native::mul(lp, p)).item() / 3.0;
  EXPECT_NEAR(F::cross_entropy(x, p).item(), expected, 1e-12);
  Tensor w = from_vector(std::vector<double>{1, 2, 3, 4}, {4});
  auto res = autograd::gradcheck(
      [&](const autograd::TensorList& in) {
        return F::cross_entropy(in[0], p, {.weight = w, .label_smoothing = 0.1});
      },
      {x});
  EXPECT_TRUE(res.ok) << res.message;
}

TEST(MseLoss, ReductionsAndGradcheck) {
  Tensor a = leaf(randn_seeded({3, 4}, 11)), b = randn_seeded({3, 4}, 12);
  double s = native::sum(native::pow(native::sub(a, b), 2.0)).item();
  EXPECT_NEAR(F::mse_loss(a, b).item(), s / 12, 1e-12);
  EXPECT_NEAR(F::mse_loss(a, b, Reduction::Sum).item(), s, 1e-12);
  EXPECT_EQ(F::mse_loss(a, b, Reduction::None).sizes(), (IntList{3, 4}));
  auto res = autograd::gradcheck([&](const autograd::TensorList& in) { return F::mse_loss(in[0], in[1]); },
                                 {a, leaf(b)});
  EXPECT_TRUE(res.ok) << res.message;
}

TEST(BCEWithLogits, StableForLargeLogits) {
  Tensor x = from_vector(std::vector<double>{100, -100, 0}, {3});
  Tensor t = from_vector(std::vector<double>{0, 1, 1}, {3});
  auto l = F::binary_cross_entropy_with_logits(x, t, {.reduction = Reduction::None}).to_vector<double>();
  EXPECT_NEAR(l[0], 100.0, 1e-9);
  EXPECT_NEAR(l[1], 100.0, 1e-9);
  EXPECT_NEAR(l[2], std::log(2.0), 1e-12);
}

TEST(BCEWithLogits, WeightAndPosWeightMatchDefinitionAndGradcheck) {
  Tensor x = leaf(randn_seeded({4, 3}, 13));
  Tensor t = native::to(native::gt(randn_seeded({4, 3}, 14), 0.0), kFloat64);
  Tensor w = native::abs(randn_seeded({4, 3}, 15));
  Tensor pw = from_vector(std::vector<double>{0.5, 2.0, 3.0}, {3});
  auto xv = x.to_vector<double>(), tv = t.to_vector<double>(), wv = w.to_vector<double>();
  double total = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    double sig = 1 / (1 + std::exp(-xv[i]));
    double p = pw.to_vector<double>()[i % 3];
    total += -wv[i] * (p * tv[i] * std::log(sig) + (1 - tv[i]) * std::log(1 - sig));
  }
  EXPECT_NEAR(F::binary_cross_entropy_with_logits(x, t, {.weight = w, .pos_weight = pw}).item(), total / 12, 1e-12);
  auto res = autograd::gradcheck(
      [&](const autograd::TensorList& in) {
        return F::binary_cross_entropy_with_logits(in[0], t, {.weight = w, .pos_weight = pw});
      },
      {x});
  EXPECT_TRUE(res.ok) << res.message;
  EXPECT_NE(error_of([&] { F::binary_cross_entropy_with_logits(x, ones({4, 2})); })
                .find("Target size ([4, 2]) must be the same as input size ([4, 3])"),
            std::string::npos);
}

TEST(LossModules, WrapFunctionalAndRegisterWeightBuffers) {
  Tensor w = from_vector(std::vector<float>{1, 2, 3}, {3});
  CrossEntropyLossImpl ce({.weight = w, .ignore_index = 0});
  ASSERT_EQ(ce.named_buffers().size(), 1u);
  EXPECT_EQ(ce.named_buffers()[0].first, "weight");
  Tensor x = randn_seeded({4, 3}, 16, kFloat32);
  Tensor t = targets({0, 1, 2, 1}, {4});
  EXPECT_EQ(ce.forward(x, t).item(), F::cross_entropy(x, t, {.weight = w, .ignore_index = 0}).item());
  BCEWithLogitsLossImpl bce({.pos_weight = ones({3})});
  EXPECT_EQ(bce.named_buffers()[0].first, "pos_weight");
  MSELossImpl mse(Reduction::Sum);
  EXPECT_EQ(mse.forward(ones({2}), zeros({2})).item(), 2.0);
  NLLLossImpl nll;
  EXPECT_NEAR(nll.forward(native::log_softmax(x, 1), t).item(), F::cross_entropy(x, t).item(), 1e-6);
}

}  // namespace
}  // namespace ember::nn
