// InferenceMode (Note [Inference tensors] in autograd/inference_mode.h): no history inside,
// tensors made inside are inference tensors, and using one in autograd later is a clear error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "autograd/inference_mode.h"
#include "autograd/ops.h"
#include "tests/support/error_text.h"

using namespace ember;
using ::testing::HasSubstr;

TEST(InferenceMode, RecordsNoHistoryAndMarksNewTensors) {
  Tensor w = tensor({1, 2}).requires_grad_();
  Tensor normal = ones({2});
  EXPECT_FALSE(normal.is_inference());
  {
    InferenceMode guard;
    EXPECT_TRUE(InferenceMode::is_enabled());
    EXPECT_FALSE(autograd::GradMode::is_enabled());
    Tensor y = mul(w, 3.0);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.grad_fn() == nullptr);
    EXPECT_TRUE(y.is_inference());
    EXPECT_TRUE(zeros({2}).is_inference());
    EXPECT_FALSE(normal.view({2, 1}).is_inference());  // a view of a normal tensor stays normal
    EXPECT_FALSE(w.is_inference());
  }
  EXPECT_FALSE(InferenceMode::is_enabled());
  EXPECT_TRUE(autograd::GradMode::is_enabled());
  EXPECT_FALSE(zeros({2}).is_inference());
}

TEST(InferenceMode, RestoresThePreviousStateWhenNested) {
  {
    NoGradGuard no_grad;
    {
      InferenceMode outer;
      {
        InferenceMode off(false);
        EXPECT_FALSE(InferenceMode::is_enabled());
        EXPECT_FALSE(zeros({1}).is_inference());
      }
      EXPECT_TRUE(InferenceMode::is_enabled());
    }
    EXPECT_FALSE(autograd::GradMode::is_enabled());  // the NoGradGuard's state, not "on"
  }
  EXPECT_TRUE(autograd::GradMode::is_enabled());
}

TEST(InferenceMode, IsPerThread) {
  InferenceMode guard;
  bool other_thread_inference = true;
  std::thread([&] { other_thread_inference = zeros({1}).is_inference(); }).join();
  EXPECT_FALSE(other_thread_inference);
}

TEST(InferenceMode, InferenceTensorCannotBeSavedForBackwardLater) {
  Tensor inf;
  {
    InferenceMode guard;
    inf = tensor({1, 2});
  }
  Tensor w = tensor({3, 4}).requires_grad_();
  EXPECT_THAT(support::error_of([&] { mul(w, inf); }), HasSubstr("Inference tensors cannot be saved for backward"));
  // Reading it without saving it is fine, and a clone is a normal tensor that autograd accepts.
  Tensor s = add(w, inf);
  s.sum().backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{1, 1}));
  Tensor c = inf.clone();
  EXPECT_FALSE(c.is_inference());
  mul(w, c).sum().backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2, 3}));
}

TEST(InferenceMode, InferenceTensorCannotBeChangedInPlaceOrRequireGradOutside) {
  Tensor inf;
  {
    InferenceMode guard;
    inf = zeros({2});
    inf.add_(1.0);  // allowed inside
  }
  EXPECT_THAT(support::error_of([&] { inf.add_(1.0); }),
              HasSubstr("in-place update to an inference tensor outside InferenceMode"));
  EXPECT_THAT(support::error_of([&] { inf.view({1, 2}).fill_(3); }),
              HasSubstr("in-place update to an inference tensor outside InferenceMode"));
  EXPECT_EQ(inf.to_vector<float>(), (std::vector<float>{1, 1}));  // nothing was written
  EXPECT_THAT(support::error_of([&] { inf.requires_grad_(); }),
              HasSubstr("setting requires_grad=True on an inference tensor outside InferenceMode"));
  EXPECT_FALSE(inf.detach().requires_grad());
  EXPECT_TRUE(inf.detach().is_inference());
}
