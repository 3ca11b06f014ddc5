// GradScaler (nn/optim/grad_scaler.h): the loss scale and its schedule (init 2^16, x2 after
// growth_interval clean steps, x0.5 after an overflow), unscaling, steps skipped on inf/NaN,
// the found-inf hook, misuse errors and the state dict round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/ops.h"
#include "nn/linear.h"
#include "nn/optim/grad_scaler.h"
#include "nn/optim/sgd.h"
#include "tests/nn/nn_test_util.h"

namespace ember::optim {
namespace {

using nn::testing::all_close;
using nn::testing::error_of;
using nn::testing::randn_seeded;

struct Fixture {
  nn::LinearImpl fc{4, 2};
  SGD sgd{fc.parameters(), SGDOptions(0.1)};
  Tensor x = randn_seeded({3, 4}, 1, kFloat32);

  // Forward, scaled backward; returns the unscaled loss.
  Tensor backward(GradScaler& scaler) {
    sgd.zero_grad();
    Tensor loss = sum(fc.forward(x));
    scaler.scale(loss).backward();
    return loss;
  }
  void poison(double value) {
    Tensor g = fc.weight.grad();
    native::fill_(g, value);
  }
};

TEST(GradScaler, DefaultsArePyTorchs) {
  GradScaler s;
  EXPECT_EQ(s.get_scale(), 65536.0);
  auto sd = s.state_dict();
  EXPECT_EQ(sd.at("scale"), 65536.0);
  EXPECT_EQ(sd.at("growth_factor"), 2.0);
  EXPECT_EQ(sd.at("backoff_factor"), 0.5);
  EXPECT_EQ(sd.at("growth_interval"), 2000.0);
  EXPECT_EQ(sd.at("_growth_tracker"), 0.0);
}

TEST(GradScaler, ScaledBackwardThenUnscaleGivesTheUnscaledGradients) {
  Fixture f;
  GradScaler s;
  f.backward(s);
  Tensor scaled = native::clone(f.fc.weight.grad());
  s.unscale_(f.sgd);
  // d(sum(x W^T + b))/dW = column sums of x for every output row.
  Tensor expected = native::expand(native::sum(f.x, {0}, true), {2, 4});
  EXPECT_TRUE(all_close(f.fc.weight.grad(), expected, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(scaled, native::mul(expected, 65536.0), 1e-6, 1e-3));
}

TEST(GradScaler, CleanStepUpdatesParametersAndCountsTowardGrowth) {
  Fixture f;
  GradScalerOptions o;
  o.growth_interval = 3;
  GradScaler s(o);
  for (int i = 0; i < 2; ++i) {
    Tensor before = native::clone(f.fc.weight);
    f.backward(s);
    EXPECT_TRUE(s.step(f.sgd));
    s.update();
    EXPECT_FALSE(all_close(f.fc.weight, before, 0, 0));
    EXPECT_EQ(s.get_scale(), 65536.0);
    EXPECT_EQ(s.growth_tracker(), i + 1);
  }
  f.backward(s);
  EXPECT_TRUE(s.step(f.sgd));
  s.update();
  EXPECT_EQ(s.get_scale(), 131072.0);  // grown after 3 clean steps
  EXPECT_EQ(s.growth_tracker(), 0);
}

class Overflow : public ::testing::TestWithParam<double> {};

TEST_P(Overflow, StepIsSkippedAndTheScaleBacksOff) {
  Fixture f;
  GradScaler s;
  f.backward(s);
  EXPECT_TRUE(s.step(f.sgd));
  s.update();
  EXPECT_EQ(s.growth_tracker(), 1);
  f.backward(s);
  f.poison(GetParam());
  Tensor w = native::clone(f.fc.weight), b = native::clone(f.fc.bias);
  EXPECT_FALSE(s.step(f.sgd));
  EXPECT_TRUE(all_close(f.fc.weight, w, 0, 0));  // untouched: no step
  EXPECT_TRUE(all_close(f.fc.bias, b, 0, 0));
  s.update();
  EXPECT_EQ(s.get_scale(), 32768.0);
  EXPECT_EQ(s.growth_tracker(), 0);
  EXPECT_EQ(s.skipped_steps(), 1);
  // The next clean step runs again.
  f.backward(s);
  EXPECT_TRUE(s.step(f.sgd));
}

INSTANTIATE_TEST_SUITE_P(GradScaler, Overflow,
                         ::testing::Values(std::numeric_limits<double>::infinity(),
                                           -std::numeric_limits<double>::infinity(),
                                           std::numeric_limits<double>::quiet_NaN()),
                         [](const auto& info) {
                           return std::isnan(info.param) ? std::string("NaN")
                                                         : std::string(info.param > 0 ? "PosInf" : "NegInf");
                         });

TEST(GradScaler, ScaledLossThatOverflowsFloat32IsSkipped) {
  // A scale so large that the scaled gradients overflow float32 by themselves.
  Fixture f;
  GradScalerOptions o;
  o.init_scale = 1e38;
  GradScaler s(o);
  native::fill_(f.x, 1e3);
  f.backward(s);
  EXPECT_FALSE(s.step(f.sgd));
  s.update();
  EXPECT_EQ(s.get_scale(), 5e37);
}

TEST(GradScaler, FoundInfSyncDecides) {
  // A peer reported an overflow (the hook raises the flag): this rank skips its clean step.
  Fixture f;
  GradScalerOptions o;
  double seen = -1;
  o.found_inf_sync = [&](Tensor& flag) {
    EXPECT_EQ(flag.dtype(), kFloat32);
    EXPECT_EQ(flag.sizes(), IntList{1});
    seen = flag.item();
    native::fill_(flag, 1.0);
  };
  GradScaler s(o);
  f.backward(s);
  Tensor w = native::clone(f.fc.weight);
  EXPECT_FALSE(s.step(f.sgd));
  EXPECT_EQ(seen, 0.0);  // the local flag: nothing found here
  EXPECT_TRUE(all_close(f.fc.weight, w, 0, 0));
  s.update();
  EXPECT_EQ(s.get_scale(), 32768.0);
}

TEST(GradScaler, MisuseIsAnError) {
  Fixture f;
  GradScaler s;
  EXPECT_NE(error_of<Error>([&] { s.update(); }).find("no inf checks were recorded"), std::string::npos);
  f.backward(s);
  s.unscale_(f.sgd);
  EXPECT_NE(error_of<Error>([&] { s.unscale_(f.sgd); }).find("unscale_() has already been called"),
            std::string::npos);
  EXPECT_TRUE(s.step(f.sgd));
  EXPECT_NE(error_of<Error>([&] { s.step(f.sgd); }).find("step() has already been called"), std::string::npos);
  EXPECT_NE(error_of<Error>([&] { s.unscale_(f.sgd); }).find("after step()"), std::string::npos);
  s.update();
  f.backward(s);
  EXPECT_TRUE(s.step(f.sgd));  // usable again after update()
  GradScalerOptions bad;
  bad.growth_factor = 1.0;
  EXPECT_NE(error_of<ValueError>([&] { GradScaler g(bad); }).find("growth_factor must be > 1"), std::string::npos);
}

TEST(GradScaler, Float16GradientsAreRejected) {
  Tensor p = native::to(randn_seeded({2}, 3, kFloat32), kFloat16);
  p.requires_grad_(true);
  SGD sgd({p}, SGDOptions(0.1));
  p.mutable_grad() = native::to(randn_seeded({2}, 4, kFloat32), kFloat16);
  GradScaler s;
  EXPECT_NE(error_of<ValueError>([&] { s.unscale_(sgd); }).find("float16 gradients"), std::string::npos);
}

TEST(GradScaler, DisabledIsTheIdentity) {
  Fixture f;
  GradScalerOptions o;
  o.enabled = false;
  GradScaler s(o);
  Tensor loss = f.backward(s);
  EXPECT_EQ(s.get_scale(), 1.0);
  Tensor expected = native::expand(native::sum(f.x, {0}, true), {2, 4});
  EXPECT_TRUE(all_close(f.fc.weight.grad(), expected, 1e-6, 1e-6));
  f.poison(std::numeric_limits<double>::infinity());
  EXPECT_TRUE(s.step(f.sgd));  // no checks when disabled
  s.update();
  EXPECT_TRUE(s.state_dict().empty());
}

TEST(GradScaler, StateDictRoundTrip) {
  Fixture f;
  GradScalerOptions o;
  o.growth_interval = 5;
  o.init_scale = 1024;
  GradScaler a(o);
  for (int i = 0; i < 3; ++i) {
    f.backward(a);
    a.step(f.sgd);
    a.update();
  }
  f.backward(a);
  f.poison(std::numeric_limits<double>::quiet_NaN());
  a.step(f.sgd);
  a.update();
  f.backward(a);
  a.step(f.sgd);
  a.update();
  const auto sd = a.state_dict();
  EXPECT_EQ(sd.at("scale"), 512.0);
  EXPECT_EQ(sd.at("_growth_tracker"), 1.0);
  GradScaler b;  // other defaults, replaced by the loaded state
  b.load_state_dict(sd);
  EXPECT_EQ(b.state_dict(), sd);
  // Both continue identically: 4 more clean steps grow each scale at the same step.
  for (int i = 0; i < 4; ++i) {
    for (GradScaler* s : {&a, &b}) {
      f.backward(*s);
      s->step(f.sgd);
      s->update();
    }
    EXPECT_EQ(a.get_scale(), b.get_scale());
    EXPECT_EQ(a.growth_tracker(), b.growth_tracker());
  }
  EXPECT_EQ(a.get_scale(), 1024.0);
}

TEST(GradScaler, LoadStateDictRejectsBadStateAndChangesNothing) {
  GradScaler s;
  auto sd = s.state_dict();
  sd.erase("_growth_tracker");
  EXPECT_NE(error_of<ValueError>([&] { s.load_state_dict(sd); }).find("no '_growth_tracker'"), std::string::npos);
  sd = s.state_dict();
  sd["scale"] = -1;
  sd["growth_factor"] = 4;
  EXPECT_NE(error_of<ValueError>([&] { s.load_state_dict(sd); }).find("scale must be positive"), std::string::npos);
  sd = s.state_dict();
  sd["_growth_tracker"] = 2000;
  EXPECT_NE(error_of<ValueError>([&] { s.load_state_dict(sd); }).find("_growth_tracker"), std::string::npos);
  EXPECT_EQ(s.state_dict(), GradScaler().state_dict());
}

}  // namespace
}  // namespace ember::optim
