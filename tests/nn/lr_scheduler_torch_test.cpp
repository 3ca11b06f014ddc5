// MultiStepLR, ExponentialLR, OneCycleLR and ReduceLROnPlateau: lr (and momentum) sequences
// against PyTorch 1.13, computed with Debian's python3-torch when this test was written on an
// SGD optimizer with two groups (lr 0.1 and 0.5, momentum 0.9): row e is every group's lr after
// e scheduler steps (row 0: after construction).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nn/optim/lr_scheduler.h"
#include "nn/optim/one_cycle_lr.h"
#include "nn/optim/reduce_lr_on_plateau.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"
#include "tests/nn/nn_test_util.h"

namespace ember::optim {
namespace {

using Rows = std::vector<std::vector<double>>;
using ::testing::HasSubstr;

struct TwoGroups {
  Tensor a = nn::testing::leaf(zeros({1}));
  Tensor b = nn::testing::leaf(zeros({1}));
  SGD opt{{ParamGroup({a}), ParamGroup({b}, std::make_unique<SGDOptions>(SGDOptions(0.5).momentum(0.9)))},
          SGDOptions(0.1).momentum(0.9)};
  std::vector<double> lrs() const {
    return {opt.param_groups()[0].options().get_lr(), opt.param_groups()[1].options().get_lr()};
  }
  std::vector<double> momenta() const {
    return {static_cast<const SGDOptions&>(opt.param_groups()[0].options()).momentum(),
            static_cast<const SGDOptions&>(opt.param_groups()[1].options()).momentum()};
  }
};

void expect_row(const std::vector<double>& got, const std::vector<double>& want, size_t row) {
  for (size_t g = 0; g < 2; ++g) EXPECT_NEAR(got[g], want[g], 1e-15 + 1e-13 * want[g]) << "row " << row << " group " << g;
}

template <class S>
void expect_rows(TwoGroups& f, S& s, const Rows& want) {
  for (size_t e = 0; e < want.size(); ++e) {
    if (e > 0) s.step();
    expect_row(f.lrs(), want[e], e);
    expect_row(s.get_last_lr(), want[e], e);
  }
}

TEST(LRSchedulerTorch, MultiStepLRWithARepeatedMilestone) {
  TwoGroups f;
  MultiStepLR s(f.opt, {2, 5, 5, 8}, 0.5);
  expect_rows(f, s, {{0.1, 0.5}, {0.1, 0.5}, {0.05, 0.25}, {0.05, 0.25}, {0.05, 0.25}, {0.0125, 0.0625},
                     {0.0125, 0.0625}, {0.0125, 0.0625}, {0.00625, 0.03125}, {0.00625, 0.03125}, {0.00625, 0.03125}});
  EXPECT_NEAR(s.closed_form_lr()[1], 0.03125, 1e-16);
}

TEST(LRSchedulerTorch, ExponentialLR) {
  TwoGroups f;
  ExponentialLR s(f.opt, 0.9);
  expect_rows(f, s, {{0.1, 0.5}, {0.09000000000000001, 0.45}, {0.08100000000000002, 0.405},
                     {0.07290000000000002, 0.36450000000000005}, {0.06561000000000002, 0.32805000000000006},
                     {0.05904900000000002, 0.2952450000000001}, {0.05314410000000002, 0.2657205000000001},
                     {0.04782969000000002, 0.23914845000000007}, {0.043046721000000024, 0.21523360500000008},
                     {0.03874204890000002, 0.19371024450000007}, {0.03486784401000002, 0.17433922005000008}});
  EXPECT_NEAR(s.closed_form_lr()[0], 0.1 * std::pow(0.9, 10), 1e-16);
}

TEST(LRSchedulerTorch, OneCycleLRCosineCyclesLrAndMomentum) {
  TwoGroups f;
  OneCycleLROptions o;
  o.total_steps = 10;
  OneCycleLR s(f.opt, {1.0, 0.5}, o);
  const Rows lrs = {{0.040000000000000036, 0.020000000000000018}, {0.52, 0.26}, {1.0, 0.5},
                    {0.9504846320134737, 0.47524231600673683}, {0.8117456539497631, 0.40587282697488153},
                    {0.6112620219362893, 0.30563101096814466}, {0.38874197806371075, 0.19437098903185537},
                    {0.18825834605023697, 0.09412917302511849}, {0.049519367986526286, 0.024759683993263143},
                    {4e-06, 2e-06}};
  const std::vector<double> momenta = {0.95, 0.8999999999999999, 0.85, 0.854951556604879, 0.8688255099070633,
                                       0.8888739533021842, 0.9111260466978157, 0.9311744900929366,
                                       0.945048443395121, 0.95};
  for (size_t e = 0; e < lrs.size(); ++e) {
    if (e > 0) s.step();
    expect_row(f.lrs(), lrs[e], e);
    expect_row(f.momenta(), {momenta[e], momenta[e]}, e);
  }
  s.step();  // PyTorch lets the schedule run one step past its end, extrapolating the last phase
  EXPECT_NEAR(f.lrs()[0], 0.04951936798652623, 1e-15);
  EXPECT_THAT(nn::testing::error_of<ValueError>([&] { s.step(); }),
              HasSubstr("Tried to step 12 times. The specified number of total steps is 10"));
}

TEST(LRSchedulerTorch, OneCycleLRLinearThreePhase) {
  TwoGroups f;
  OneCycleLROptions o;
  o.total_steps = 12;
  o.pct_start = 0.25;
  o.anneal_cos = false;
  o.three_phase = true;
  o.div_factor = 10;
  o.final_div_factor = 100;
  o.cycle_momentum = false;
  OneCycleLR s(f.opt, 0.8, o);
  const std::vector<double> want = {0.08, 0.44000000000000006, 0.8, 0.44, 0.07999999999999996, 0.0686857142857143,
                                    0.05737142857142857, 0.04605714285714286, 0.034742857142857145,
                                    0.023428571428571424, 0.012114285714285716, 0.0007999999999999952};
  for (size_t e = 0; e < want.size(); ++e) {
    if (e > 0) s.step();
    expect_row(f.lrs(), {want[e], want[e]}, e);
  }
  expect_row(f.momenta(), {0.9, 0.9}, 0);  // untouched without cycle_momentum
}

TEST(LRSchedulerTorch, OneCycleLRCyclesAdamsBeta1AndChecksItsArguments) {
  Tensor p = nn::testing::leaf(zeros({1}));
  Adam adam({p}, AdamOptions(1e-3).betas({0.9, 0.99}));
  OneCycleLROptions o;
  o.epochs = 2;
  o.steps_per_epoch = 5;
  OneCycleLR s(adam, 0.01, o);
  EXPECT_EQ(s.total_steps(), 10);
  const auto& betas = static_cast<const AdamOptions&>(adam.param_groups()[0].options()).betas();
  EXPECT_EQ(betas.first, 0.95);
  EXPECT_EQ(betas.second, 0.99);
  TwoGroups f;
  OneCycleLROptions bad;
  EXPECT_THAT(nn::testing::error_of<ValueError>([&] { OneCycleLR(f.opt, 1.0, bad); }), HasSubstr("total_steps"));
  bad.total_steps = 10;
  bad.pct_start = 1.5;
  EXPECT_THAT(nn::testing::error_of<ValueError>([&] { OneCycleLR(f.opt, 1.0, bad); }),
              HasSubstr("Expected float between 0 and 1 pct_start, but got 1.5"));
  bad.pct_start = 0.3;
  EXPECT_THAT(nn::testing::error_of<ValueError>([&] { OneCycleLR(f.opt, {1.0, 2.0, 3.0}, bad); }),
              HasSubstr("expected 2 values for max_lr, got 3"));
}

TEST(LRSchedulerTorch, ReduceLROnPlateauMinRelWithCooldownAndMinLr) {
  TwoGroups f;
  ReduceLROnPlateauOptions o;
  o.factor = 0.5;
  o.patience = 2;
  o.cooldown = 1;
  o.min_lrs = {0.01, 0.2};
  ReduceLROnPlateau s(f.opt, o);
  const std::vector<double> metric = {5, 4, 4, 4.5, 4.2, 4.0, 3.9, 3.9, 3.9, 3.9, 3.9, 3.5, 3.5, 3.5, 3.5};
  const Rows want = {{0.1, 0.5},    {0.1, 0.5},    {0.1, 0.5},    {0.1, 0.5},   {0.1, 0.5},   {0.05, 0.25},
                     {0.05, 0.25},  {0.05, 0.25},  {0.05, 0.25},  {0.05, 0.25}, {0.025, 0.2}, {0.025, 0.2},
                     {0.025, 0.2},  {0.025, 0.2},  {0.025, 0.2},  {0.0125, 0.2}};
  expect_row(f.lrs(), want[0], 0);
  for (size_t e = 1; e < want.size(); ++e) {
    s.step(metric[e - 1]);
    expect_row(f.lrs(), want[e], e);
    expect_row(s.get_last_lr(), want[e], e);
  }
}

TEST(LRSchedulerTorch, ReduceLROnPlateauMaxAbs) {
  TwoGroups f;
  ReduceLROnPlateauOptions o;
  o.mode_max = true;
  o.patience = 1;
  o.threshold = 0.2;
  o.threshold_abs = true;
  ReduceLROnPlateau s(f.opt, o);
  const std::vector<double> metric = {1, 2, 2.0001, 2.5, 2.5, 2.5, 2.5, 2.6};
  const Rows want = {{0.1, 0.5}, {0.1, 0.5}, {0.1, 0.5}, {0.1, 0.5}, {0.1, 0.5}, {0.1, 0.5},
                     {0.010000000000000002, 0.05}, {0.010000000000000002, 0.05}, {0.0010000000000000002, 0.005000000000000001}};
  for (size_t e = 1; e < want.size(); ++e) {
    s.step(metric[e - 1]);
    expect_row(f.lrs(), want[e], e);
  }
  EXPECT_THAT(nn::testing::error_of<ValueError>([&] { ReduceLROnPlateau(f.opt, ReduceLROnPlateauOptions{.factor = 1.0}); }),
              HasSubstr("Factor should be < 1.0."));
}

}  // namespace
}  // namespace ember::optim
