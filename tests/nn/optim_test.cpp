// SGD / Adam / AdamW: updates against the closed-form recurrences in float64, the fused CPU
// kernels against the native-op path (non-contiguous parameters), param groups with their own
// hyper-parameters, zero_grad, state_dict keys and a load that continues bit-exactly, load
// errors, validation messages, and convergence on a small regression.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "nn/linear.h"
#include "nn/optim/adam.h"
#include "nn/optim/adagrad.h"
#include "nn/optim/adamw.h"
#include "nn/optim/rmsprop.h"
#include "nn/optim/sgd.h"
#include "tests/nn/nn_test_util.h"

namespace ember::optim {
namespace {

using nn::testing::all_close;
using nn::testing::bit_equal;
using nn::testing::error_of;
using nn::testing::leaf;
using nn::testing::randn_seeded;

Tensor scalar_param(double v) { return leaf(full({1}, v, TensorOptions(kFloat64))); }
void set_grad(Tensor& p, double g) { p.set_grad(full(p.sizes(), g, TensorOptions(p.dtype()))); }

TEST(SGD, NesterovMomentumWithWeightDecayFollowsTheRecurrence) {
  Tensor p = scalar_param(1.0);
  SGD opt({p}, SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01));
  double x = 1.0, buf = 0.0;
  const double grads[] = {0.5, -0.25, 0.75};
  for (int k = 0; k < 3; ++k) {
    set_grad(p, grads[k]);
    opt.step();
    double d = grads[k] + 0.01 * x;
    buf = k == 0 ? d : 0.9 * buf + d;
    x -= 0.1 * (d + 0.9 * buf);
    EXPECT_NEAR(p.item(), x, 1e-15) << "step " << k;
  }
  EXPECT_TRUE(opt.find_state(p)->count("momentum_buffer"));
}

TEST(SGD, DampeningAndPlainMomentum) {
  Tensor p = scalar_param(2.0);
  SGD opt({p}, SGDOptions(0.5).momentum(0.5).dampening(0.3));
  double x = 2.0, buf = 0.0;
  for (int k = 0; k < 3; ++k) {
    set_grad(p, 1.0 + k);
    opt.step();
    buf = k == 0 ? 1.0 + k : 0.5 * buf + 0.7 * (1.0 + k);
    x -= 0.5 * buf;
    EXPECT_NEAR(p.item(), x, 1e-14);
  }
}

TEST(Adam, FollowsTheRecurrenceWithAmsgradAndWeightDecay) {
  for (bool amsgrad : {false, true}) {
    Tensor p = scalar_param(0.5);
    Adam opt({p}, AdamOptions(0.01).betas({0.8, 0.95}).eps(1e-6).weight_decay(0.1).amsgrad(amsgrad));
    double x = 0.5, m = 0, v = 0, vmax = 0;
    const double grads[] = {1.0, -2.0, 0.1, 0.1};
    for (int k = 0; k < 4; ++k) {
      set_grad(p, grads[k]);
      opt.step();
      double g = grads[k] + 0.1 * x;
      m = 0.8 * m + 0.2 * g;
      v = 0.95 * v + 0.05 * g * g;
      vmax = std::max(vmax, v);
      double bc1 = 1 - std::pow(0.8, k + 1), bc2 = 1 - std::pow(0.95, k + 1);
      double denom = std::sqrt(amsgrad ? vmax : v) / std::sqrt(bc2) + 1e-6;
      x -= 0.01 / bc1 * m / denom;
      EXPECT_NEAR(p.item(), x, 1e-14) << "amsgrad=" << amsgrad << " step " << k;
    }
    const ParamState& st = *opt.find_state(p);
    EXPECT_EQ(st.at("step").item(), 4.0);
    EXPECT_EQ(st.count("max_exp_avg_sq"), amsgrad ? 1u : 0u);
  }
}

TEST(AdamW, DecaysWeightsDecoupledFromTheGradient) {
  Tensor p = scalar_param(3.0);
  AdamW opt({p}, AdamWOptions(0.1).weight_decay(0.5));
  EXPECT_EQ(AdamWOptions().weight_decay(), 1e-2);
  double x = 3.0, m = 0, v = 0;
  for (int k = 0; k < 3; ++k) {
    set_grad(p, 0.3);
    opt.step();
    x *= 1 - 0.1 * 0.5;
    m = 0.9 * m + 0.1 * 0.3;
    v = 0.999 * v + 0.001 * 0.09;
    double bc1 = 1 - std::pow(0.9, k + 1), bc2 = 1 - std::pow(0.999, k + 1);
    x -= 0.1 / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + 1e-8);
    EXPECT_NEAR(p.item(), x, 1e-14);
  }
  EXPECT_STREQ(opt.type_name(), "AdamW");
}

// The fused kernels run for contiguous CPU parameters; a transposed (non-contiguous) copy of the
// same parameter takes the native-op path. Both must agree.
template <class Opt, class Options>
void expect_fused_matches_native(const Options& options) {
  Tensor base = randn_seeded({4, 3}, 1, kFloat32);
  Tensor a = leaf(base);
  Tensor b = native::t(native::contiguous(native::t(base)));  // same values, transposed strides
  b.requires_grad_(true);
  ASSERT_FALSE(b.is_contiguous());
  Opt oa({a}, options), ob({b}, options);
  for (int k = 0; k < 5; ++k) {
    Tensor g = randn_seeded({4, 3}, 100 + k, kFloat32);
    a.set_grad(native::clone(g));
    b.set_grad(native::t(native::contiguous(native::t(g))));
    oa.step();
    ob.step();
  }
  EXPECT_TRUE(all_close(a, b, 1e-6, 1e-7));
}

TEST(Optimizer, FusedKernelsMatchNativeOpPath) {
  expect_fused_matches_native<SGD>(SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.1));
  expect_fused_matches_native<SGD>(SGDOptions(0.1).momentum(0.5).dampening(0.5).maximize(true));
  expect_fused_matches_native<Adam>(AdamOptions(0.01).weight_decay(0.1).amsgrad(true));
  expect_fused_matches_native<AdamW>(AdamWOptions(0.01).weight_decay(0.2));
}

TEST(Optimizer, ParamGroupsHaveTheirOwnHyperParameters) {
  Tensor a = scalar_param(1.0), b = scalar_param(1.0);
  SGD opt({ParamGroup({a}), ParamGroup({b}, std::make_unique<SGDOptions>(SGDOptions(1.0)))}, SGDOptions(0.1));
  ASSERT_EQ(opt.param_groups().size(), 2u);
  set_grad(a, 1.0);
  set_grad(b, 1.0);
  opt.step();
  EXPECT_NEAR(a.item(), 0.9, 1e-15);
  EXPECT_NEAR(b.item(), 0.0, 1e-15);
  opt.param_groups()[0].options().set_lr(0.5);
  opt.step();
  EXPECT_NEAR(a.item(), 0.4, 1e-15);
  // A parameter without a gradient is skipped.
  Tensor c = scalar_param(5.0);
  opt.add_param_group(ParamGroup({c}));
  opt.step();
  EXPECT_EQ(c.item(), 5.0);
}

TEST(Optimizer, ZeroGradSetsToNoneByDefault) {
  Tensor p = scalar_param(1.0);
  SGD opt({p}, SGDOptions(0.1));
  set_grad(p, 2.0);
  opt.zero_grad(false);
  ASSERT_TRUE(p.grad().defined());
  EXPECT_EQ(p.grad().item(), 0.0);
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
}

TEST(Optimizer, StateDictIsKeyedByParameterIndexLikePyTorch) {
  Tensor a = scalar_param(1.0), b = scalar_param(2.0), c = scalar_param(3.0);
  Adam opt({ParamGroup({a, b}), ParamGroup({c})}, AdamOptions(0.01));
  set_grad(a, 1.0);
  set_grad(c, 1.0);  // b has no gradient: no state
  opt.step();
  OptimizerStateDict sd = opt.state_dict();
  ASSERT_EQ(sd.param_groups.size(), 2u);
  EXPECT_EQ(sd.param_groups[0].params, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(sd.param_groups[1].params, (std::vector<int64_t>{2}));
  ASSERT_EQ(sd.state.size(), 2u);
  EXPECT_TRUE(sd.state.count(0) && sd.state.count(2));
  std::vector<std::string> keys;
  for (auto& [k, v] : sd.state.at(0)) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"exp_avg", "exp_avg_sq", "step"}));
  const auto json = nlohmann::json::parse(sd.param_groups[0].options);
  EXPECT_EQ(json.at("lr").get<double>(), 0.01);
  EXPECT_EQ(json.at("betas").get<std::vector<double>>(), (std::vector<double>{0.9, 0.999}));
  EXPECT_FALSE(json.at("amsgrad").get<bool>());
}

TEST(Optimizer, LoadStateDictContinuesBitExactly) {
  auto run = [](Optimizer& opt, Tensor& p, int from, int to) {
    for (int k = from; k < to; ++k) {
      p.set_grad(randn_seeded(p.sizes(), 500 + k, kFloat32));
      opt.step();
    }
  };
  Tensor p1 = leaf(randn_seeded({5, 2}, 2, kFloat32));
  Adam o1({p1}, AdamOptions(0.05).amsgrad(true));
  run(o1, p1, 0, 3);
  Tensor p2 = leaf(p1);
  Adam o2({p2}, AdamOptions(0.7));  // different lr: the loaded group's hyper-parameters win
  o2.load_state_dict(o1.state_dict());
  EXPECT_EQ(o2.param_groups()[0].options().get_lr(), 0.05);
  EXPECT_FALSE(o2.find_state(p2)->at("exp_avg").is_same(o1.find_state(p1)->at("exp_avg")));  // copied
  run(o1, p1, 3, 6);
  run(o2, p2, 3, 6);
  EXPECT_TRUE(bit_equal(p1, p2));
}

TEST(Optimizer, LoadStateDictRejectsAMismatchedLayout) {
  Tensor a = scalar_param(1.0), b = scalar_param(2.0);
  SGD one({a, b}, SGDOptions(0.1));
  SGD two({ParamGroup({a}), ParamGroup({b})}, SGDOptions(0.1));
  EXPECT_NE(error_of([&] { one.load_state_dict(two.state_dict()); })
                .find("loaded state dict has a different number of parameter groups"),
            std::string::npos);
  SGD with_momentum({a}, SGDOptions(0.1).momentum(0.9));
  OptimizerStateDict bad;
  bad.param_groups.push_back({with_momentum.param_groups()[0].options().to_json(), {0}});
  bad.state[0]["momentum_buffer"] = zeros({3}, TensorOptions(kFloat64));
  EXPECT_NE(error_of([&] { with_momentum.load_state_dict(bad); })
                .find("state \"momentum_buffer\" of parameter 0 has shape [3], the parameter has shape [1]"),
            std::string::npos);
  SGD single({a}, SGDOptions(0.1));
  EXPECT_NE(error_of([&] { single.load_state_dict(one.state_dict()); })
                .find("loaded state dict contains a parameter group that doesn't match the size of optimizer's group"),
            std::string::npos);
}

TEST(Optimizer, ValidationMessagesAreTorchs) {
  Tensor p = scalar_param(1.0);
  EXPECT_NE(error_of([&] { SGD({p}, SGDOptions(-1.0)); }).find("Invalid learning rate: -1"), std::string::npos);
  EXPECT_NE(error_of([&] { SGD({p}, SGDOptions(0.1).nesterov(true)); })
                .find("Nesterov momentum requires a momentum and zero dampening"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Adam({p}, AdamOptions().betas({1.0, 0.9})); }).find("Invalid beta parameter at index 0: 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Adam({p}, AdamOptions().eps(-1)); }).find("Invalid epsilon value: -1"), std::string::npos);
  EXPECT_NE(error_of([&] { SGD(std::vector<Tensor>{}, SGDOptions(0.1)); }).find("optimizer got an empty parameter list"),
            std::string::npos);
  SGD opt({p}, SGDOptions(0.1));
  EXPECT_NE(error_of([&] { opt.add_param_group(ParamGroup({p})); })
                .find("some parameters appear in more than one parameter group"),
            std::string::npos);
  Tensor nonleaf = mul(p, 2.0);
  EXPECT_NE(error_of([&] { SGD({nonleaf}, SGDOptions(0.1)); }).find("can't optimize a non-leaf Tensor"),
            std::string::npos);
  EXPECT_THROW(SGD({ParamGroup({scalar_param(1.0)}, std::make_unique<AdamOptions>())}, SGDOptions(0.1)), TypeError);
}

TEST(Optimizer, OptionsFromJsonNameTheMissingKeyAndTheText) {
  EXPECT_NE(error_of<ValueError>([] { SGDOptions(0.1).from_json(R"({"lr": 0.5})"); })
                .find(R"(SGD options: missing key "momentum" in {"lr": 0.5})"),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([] { AdamOptions().from_json(R"({"lr": 0.5, "betas": [0.9, 0.99]})"); })
                .find(R"(Adam options: missing key "eps" in {"lr": 0.5, "betas": [0.9, 0.99]})"),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([] { AdamWOptions().from_json("{}"); }).find(R"(Adam options: missing key "lr" in {})"),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([] { RMSpropOptions().from_json(R"({"lr": 1, "alpha": 0.9})"); })
                .find(R"(RMSprop options: missing key "eps" in {"lr": 1, "alpha": 0.9})"),
            std::string::npos);
  EXPECT_NE(error_of<ValueError>([] { AdagradOptions().from_json(R"({"lr": 1})"); })
                .find(R"(Adagrad options: missing key "lr_decay" in {"lr": 1})"),
            std::string::npos);
  // A present key of the wrong kind is named by its accessor instead.
  EXPECT_NE(error_of<ValueError>([] { SGDOptions(0.1).from_json(R"({"lr": "fast"})"); })
                .find("SGD lr: expected a number in JSON"),
            std::string::npos);
}

// y = X w* + b*: every optimizer drives the MSE of a Linear(3, 1) to ~0.
template <class Opt, class Options>
double regression_loss_after(const Options& options, int steps) {
  Tensor X = randn_seeded({64, 3}, 7, kFloat32);
  Tensor w_true = from_vector(std::vector<float>{1.5f, -2.0f, 0.5f}, {3, 1});
  Tensor y = native::add(native::mm(X, w_true), 0.3);
  nn::LinearImpl lin(3, 1);
  Opt opt(lin.parameters(), options);
  double last = 0;
  for (int k = 0; k < steps; ++k) {
    opt.zero_grad();
    Tensor d = sub(lin.forward(X), y);
    Tensor loss = mean(mul(d, d));
    loss.backward();
    opt.step();
    last = loss.item();
  }
  return last;
}

TEST(Optimizer, ConvergesOnALinearRegression) {
  EXPECT_LT((regression_loss_after<SGD>(SGDOptions(0.1).momentum(0.9), 300)), 1e-6);
  EXPECT_LT((regression_loss_after<SGD>(SGDOptions(0.05).momentum(0.9).nesterov(true), 300)), 1e-6);
  EXPECT_LT((regression_loss_after<Adam>(AdamOptions(0.05), 600)), 1e-4);
  EXPECT_LT((regression_loss_after<AdamW>(AdamWOptions(0.05).weight_decay(0.0), 600)), 1e-4);
}

TEST(Optimizer, StepWithClosureReturnsItsLoss) {
  Tensor p = scalar_param(3.0);
  SGD opt({p}, SGDOptions(0.1));
  Tensor loss = opt.step([&] {
    opt.zero_grad();
    Tensor l = mul(p, p);
    l.backward(ones({1}, TensorOptions(kFloat64)));
    return l;
  });
  EXPECT_EQ(loss.item(), 9.0);
  EXPECT_NEAR(p.item(), 3.0 - 0.1 * 6.0, 1e-15);
}

}  // namespace
}  // namespace ember::optim
