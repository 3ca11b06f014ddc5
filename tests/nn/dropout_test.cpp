// nn::Dropout / F::dropout: p validation, eval identity, survivor scaling 1/(1-p) and its
// gradient, p = 0 and p = 1, reproducibility from a seeded generator.
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/functional.h"
#include "nn/dropout.h"
#include "tests/nn/nn_test_util.h"

namespace ember::nn {
namespace {

using testing::error_of;

TEST(Dropout, RejectsProbabilityOutsideZeroOne) {
  EXPECT_NE(error_of([] { DropoutImpl(1.5); }).find("dropout probability has to be between 0 and 1, but got 1.5"),
            std::string::npos);
  EXPECT_THROW(F::dropout(ones({2}), -0.1), ValueError);
}

TEST(Dropout, EvalIsIdentity) {
  DropoutImpl d(0.3);
  d.eval();
  Tensor x = ones({10});
  EXPECT_TRUE(d.forward(x).is_same(x));
}

TEST(Dropout, SurvivorsAreScaledAndGradientFollowsTheMask) {
  Tensor x = testing::leaf(full({4000}, 3.0));
  Tensor y = F::dropout(x, 0.25, true);
  sum(y).backward();
  auto yv = y.to_vector<float>();
  auto gv = x.grad().to_vector<float>();
  int dropped = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    if (yv[i] == 0.0f) {
      ++dropped;
      EXPECT_EQ(gv[i], 0.0f);
    } else {
      EXPECT_FLOAT_EQ(yv[i], 4.0f);  // 3 / (1 - 0.25)
      EXPECT_FLOAT_EQ(gv[i], 1.0f / 0.75f);
    }
  }
  EXPECT_NEAR(dropped / 4000.0, 0.25, 0.03);
}

TEST(Dropout, ZeroAndOneProbabilities) {
  Tensor x = testing::leaf(ones({5}));
  EXPECT_TRUE(F::dropout(x, 0.0, true).is_same(x));
  Tensor y = F::dropout(x, 1.0, true);
  for (float v : y.to_vector<float>()) EXPECT_EQ(v, 0.0f);
  sum(y).backward();
  for (float v : x.grad().to_vector<float>()) EXPECT_EQ(v, 0.0f);
}

TEST(Dropout, SeededGeneratorReproducesTheMask) {
  Generator g1(42), g2(42);
  DropoutImpl a(0.5), b(0.5);
  a.set_generator(&g1);
  b.set_generator(&g2);
  Tensor x = ones({64});
  EXPECT_TRUE(testing::bit_equal(a.forward(x), b.forward(x)));
  EXPECT_FALSE(testing::bit_equal(a.forward(x), a.forward(x)));
}

TEST(Dropout, GradcheckFloat64WithAFixedMask) {
  Tensor x = testing::leaf(testing::randn_seeded({4, 5}, 3));
  auto r = autograd::gradcheck(
      [](const autograd::TensorList& in) {
        Generator g(11);  // the same mask on every evaluation
        return F::dropout(in[0], 0.4, true, &g);
      },
      {x});
  EXPECT_TRUE(r.ok) << r.message;
}

}  // namespace
}  // namespace ember::nn
