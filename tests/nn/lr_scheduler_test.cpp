// LR schedulers: StepLR, CosineAnnealingLR, LinearLR, LambdaLR and LinearWarmup lr sequences
// against their closed forms (and the groups' lrs), per-group base lrs, state round trip, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "nn/optim/lr_scheduler.h"
#include "nn/optim/sgd.h"
#include "tests/nn/nn_test_util.h"

namespace ember::optim {
namespace {

using nn::testing::error_of;

struct Fixture {
  Tensor a = nn::testing::leaf(zeros({1}));
  Tensor b = nn::testing::leaf(zeros({1}));
  SGD opt{{ParamGroup({a}), ParamGroup({b}, std::make_unique<SGDOptions>(SGDOptions(0.5)))}, SGDOptions(0.1)};
};

// Steps `s` n times; after each, every group's lr equals expected(epoch, base_lr) and get_last_lr().
template <class S, class E>
void expect_sequence(Fixture& f, S& s, int n, E expected) {
  const double base[] = {0.1, 0.5};
  for (int epoch = 0; epoch <= n; ++epoch) {
    if (epoch > 0) s.step();
    ASSERT_EQ(s.last_epoch(), epoch);
    for (size_t g = 0; g < 2; ++g) {
      double want = expected(epoch, base[g]);
      EXPECT_NEAR(f.opt.param_groups()[g].options().get_lr(), want, 1e-15 + 1e-12 * want) << "epoch " << epoch;
      EXPECT_EQ(s.get_last_lr()[g], f.opt.param_groups()[g].options().get_lr());
      EXPECT_NEAR(s.closed_form_lr()[g], want, 1e-15 + 1e-12 * want);
    }
  }
}

TEST(LRScheduler, StepLR) {
  Fixture f;
  StepLR s(f.opt, 3, 0.5);
  expect_sequence(f, s, 10, [](int e, double b) { return b * std::pow(0.5, e / 3); });
}

TEST(LRScheduler, CosineAnnealingLRIncludingPastTMax) {
  Fixture f;
  CosineAnnealingLR s(f.opt, 5, 0.01);
  expect_sequence(f, s, 14, [](int e, double b) {
    return 0.01 + (b - 0.01) * (1 + std::cos(std::numbers::pi * e / 5)) / 2;
  });
}

TEST(LRScheduler, LinearLRWarmup) {
  Fixture f;
  LinearLR s(f.opt, 0.25, 1.0, 4);
  expect_sequence(f, s, 8, [](int e, double b) { return b * (0.25 + 0.75 * std::min(e, 4) / 4.0); });
}

TEST(LRScheduler, LambdaLRAndLinearWarmup) {
  {
    Fixture f;
    LambdaLR s(f.opt, [](int64_t e) { return 1.0 / (1.0 + static_cast<double>(e)); });
    expect_sequence(f, s, 5, [](int e, double b) { return b / (1.0 + e); });
  }
  {
    Fixture f;
    LinearWarmup s(f.opt, 4);
    expect_sequence(f, s, 7, [](int e, double b) { return b * std::min(1.0, (e + 1) / 4.0); });
  }
  Fixture f;
  EXPECT_NE(error_of([&] { LambdaLR(f.opt, std::vector<LambdaLR::Lambda>{[](int64_t) { return 1.0; }}); })
                .find("Expected 2 lr_lambdas, but got 1"),
            std::string::npos);
}

TEST(LRScheduler, StateRoundTripResumesTheSequence) {
  Fixture f1, f2;
  CosineAnnealingLR s1(f1.opt, 6);
  for (int i = 0; i < 4; ++i) s1.step();
  CosineAnnealingLR s2(f2.opt, 6);
  s2.load_state_json(s1.state_json());
  for (size_t g = 0; g < 2; ++g) f2.opt.param_groups()[g].options().set_lr(s1.get_last_lr()[g]);
  for (int i = 0; i < 5; ++i) {
    s1.step();
    s2.step();
    EXPECT_EQ(s1.get_last_lr(), s2.get_last_lr());
  }
}

TEST(LRScheduler, LoadStateJsonNamesTheMissingKey) {
  Fixture f;
  StepLR s(f.opt, 2);
  const std::string what = error_of<ValueError>([&] { s.load_state_json(R"({"last_epoch": 3, "step_count": 3})"); });
  EXPECT_NE(what.find(R"(LRScheduler state: missing key "base_lrs")"), std::string::npos) << what;
  EXPECT_EQ(what.find(" in {"), std::string::npos) << what;
  EXPECT_EQ(s.last_epoch(), 0);
}

TEST(LRScheduler, InvalidArguments) {
  Fixture f;
  EXPECT_THROW(StepLR(f.opt, 0), ValueError);
  EXPECT_THROW(CosineAnnealingLR(f.opt, 0), ValueError);
  EXPECT_NE(error_of([&] { LinearLR(f.opt, 0.0); })
                .find("Starting multiplicative factor expected to be greater than 0 and less or equal to 1."),
            std::string::npos);
  EXPECT_THROW(LinearWarmup(f.opt, 0), ValueError);
}

}  // namespace
}  // namespace ember::optim
