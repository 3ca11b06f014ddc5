// RMSprop and Adagrad against PyTorch 1.13: five steps on the loss sum(c * p^2) / 2 + sum(d * p)
// in float64 from p = [0.5, -1, 2], c = [1, 0.5, 2], d = [0.1, -0.3, 0.2]. The expected
// parameters were computed with Debian's python3-torch (torch.optim.RMSprop / Adagrad, same
// loss, same options) when this test was written. Also: options from a number, state_dict
// round trip, validation messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "nn/optim/adagrad.h"
#include "nn/optim/adam.h"
#include "nn/optim/rmsprop.h"
#include "nn/optim/sgd.h"
#include "tests/nn/nn_test_util.h"

namespace ember::optim {
namespace {

using ::testing::HasSubstr;

// Runs `steps` steps of `make({p})` on the test loss and returns p.
template <class Make>
std::vector<double> run(Make make, int steps = 5) {
  Tensor p = tensor({0.5, -1.0, 2.0}, kFloat64).requires_grad_();
  Tensor c = tensor({1.0, 0.5, 2.0}, kFloat64), d = tensor({0.1, -0.3, 0.2}, kFloat64);
  auto opt = make(std::vector<Tensor>{p});
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    Tensor loss = c.mul(p).mul(p).sum().div(2.0).add(d.mul(p).sum());
    loss.backward();
    opt.step();
  }
  return p.to_vector<double>();
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-14) << "element " << i;
}

TEST(RMSprop, MatchesPyTorch) {
  expect_near(run([](std::vector<Tensor> p) { return RMSprop(p); }),
              {0.2127536906944189, -0.6881285181598479, 1.684984833063759});
  expect_near(run([](std::vector<Tensor> p) {
                return RMSprop(p, RMSpropOptions(0.01).alpha(0.9).eps(1e-6).weight_decay(0.1).momentum(0.5).centered(true));
              }),
              {0.306818284621667, -0.8001874548940175, 1.799057455811753});
  expect_near(run([](std::vector<Tensor> p) { return RMSprop(p, RMSpropOptions(0.01).momentum(0.9).maximize(true)); }),
              {1.5449335120443695, -1.9935372415857329, 2.9844325009528663});
}

TEST(Adagrad, MatchesPyTorch) {
  expect_near(run([](std::vector<Tensor> p) { return Adagrad(p, 0.1); }),
              {0.2139279458139722, -0.689402570202899, 1.6862658544218736});
  expect_near(run([](std::vector<Tensor> p) {
                return Adagrad(p, AdagradOptions(0.1).lr_decay(0.01).weight_decay(0.05).initial_accumulator_value(0.2).eps(1e-8));
              }),
              {0.2488584616042283, -0.7148580518067829, 1.6918724021035114});
  expect_near(run([](std::vector<Tensor> p) { return Adagrad(p, AdagradOptions(0.1).maximize(true)); }),
              {0.8496515899084481, -1.3342163931465865, 2.3317163888903205});
}

TEST(Optimizer, OptionsConvertFromANumber) {
  Tensor p = tensor({1.0}).requires_grad_();
  SGD sgd({p}, 0.1);
  Adam adam({p}, 1e-3);
  RMSprop rms({p}, 0.02);
  Adagrad ada({p}, 0.3);
  EXPECT_EQ(sgd.defaults().get_lr(), 0.1);
  EXPECT_EQ(adam.defaults().get_lr(), 1e-3);
  EXPECT_EQ(rms.defaults().get_lr(), 0.02);
  EXPECT_EQ(ada.defaults().get_lr(), 0.3);
}

TEST(Adagrad, StateExistsFromConstructionAndRoundTrips) {
  Tensor p = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Adagrad opt({p}, AdagradOptions(0.1).initial_accumulator_value(0.5));
  const ParamState* st = opt.find_state(p);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->at("sum").to_vector<double>(), (std::vector<double>{0.5, 0.5}));
  p.set_grad(tensor({1.0, -1.0}, kFloat64));
  opt.step();
  Tensor q = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Adagrad other({q}, 0.1);
  other.load_state_dict(opt.state_dict());
  EXPECT_EQ(other.find_state(q)->at("sum").to_vector<double>(), (std::vector<double>{1.5, 1.5}));
  EXPECT_EQ(other.find_state(q)->at("step").item(), 1.0);
  auto bad = opt.state_dict();
  bad.state[0].erase("sum");
  EXPECT_THAT(nn::testing::error_of([&] { other.load_state_dict(bad); }), HasSubstr("lacks \"sum\""));
}

TEST(RMSprop, StateDictRoundTripContinuesIdentically) {
  auto make = [](Tensor& p) { return RMSprop({p}, RMSpropOptions(0.05).momentum(0.5).centered(true)); };
  Tensor a = tensor({1.0, -2.0}, kFloat64).requires_grad_(), b = tensor({1.0, -2.0}, kFloat64).requires_grad_();
  RMSprop oa = make(a), ob = make(b);
  a.set_grad(tensor({0.3, 0.1}, kFloat64));
  oa.step();
  native::copy_(b, a);
  ob.load_state_dict(oa.state_dict());
  for (Tensor* p : {&a, &b}) p->set_grad(tensor({-0.2, 0.4}, kFloat64));
  oa.step();
  ob.step();
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
}

TEST(RMSprop, ValidationMessagesAreTorchs) {
  Tensor p = tensor({1.0}).requires_grad_();
  EXPECT_THAT(nn::testing::error_of([&] { RMSprop({p}, RMSpropOptions(-1)); }), HasSubstr("Invalid learning rate: -1"));
  EXPECT_THAT(nn::testing::error_of([&] { RMSprop({p}, RMSpropOptions().alpha(-0.5)); }),
              HasSubstr("Invalid alpha value: -0.5"));
  EXPECT_THAT(nn::testing::error_of([&] { Adagrad({p}, AdagradOptions().lr_decay(-1)); }),
              HasSubstr("Invalid lr_decay value: -1"));
  EXPECT_THAT(nn::testing::error_of([&] { Adagrad({p}, AdagradOptions().initial_accumulator_value(-1)); }),
              HasSubstr("Invalid initial_accumulator_value value: -1"));
}

}  // namespace
}  // namespace ember::optim
