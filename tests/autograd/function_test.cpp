// Custom autograd Functions (Extending PyTorch): forward/backward with saved tensors and data.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "autograd/function.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/ops/native.h"
#include "tests/support/error_text.h"

using namespace ember;
using autograd::AutogradContext;
using autograd::TensorList;

namespace {
// y = x^3 * scale
struct Cube : autograd::Function<Cube> {
  static constexpr const char* kName = "CubeBackward";
  static Tensor forward(AutogradContext* ctx, const Tensor& x, double scale) {
    ctx->save_for_backward({x});
    ctx->saved_data["scale"] = scale;
    return native::mul(native::mul(native::mul(x, x), x), scale);
  }
  static TensorList backward(AutogradContext* ctx, TensorList g) {
    Tensor x = ctx->get_saved_variables()[0];
    double scale = std::any_cast<double>(ctx->saved_data["scale"]);
    return {native::mul(native::mul(native::mul(x, x), 3.0 * scale), g[0])};
  }
};

// Two inputs, two outputs: (a+b, a*b)
struct SumProd : autograd::Function<SumProd> {
  static TensorList forward(AutogradContext* ctx, const Tensor& a, const Tensor& b) {
    ctx->save_for_backward({a, b});
    return {native::add(a, b), native::mul(a, b)};
  }
  static TensorList backward(AutogradContext* ctx, TensorList g) {
    auto s = ctx->get_saved_variables();
    Tensor ga, gb;
    Tensor g0 = g[0].defined() ? g[0] : zeros_like(s[0]);
    Tensor g1 = g[1].defined() ? g[1] : zeros_like(s[0]);
    if (ctx->needs_input_grad(0)) ga = native::add(g0, native::mul(g1, s[1]));
    if (ctx->needs_input_grad(1)) gb = native::add(g0, native::mul(g1, s[0]));
    return {ga, gb};
  }
};

// Calls backward from inside backward (reentrant).
struct Reentrant : autograd::Function<Reentrant> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return native::clone(x);
  }
  static TensorList backward(AutogradContext* ctx, TensorList g) {
    Tensor x = native::clone(ctx->get_saved_variables()[0]);
    x.requires_grad_(true);
    Tensor inner;
    {
      autograd::AutoGradMode on(true);
      inner = sum(mul(x, x));
    }
    auto gx = autograd::grad({inner}, {x});
    return {native::mul(gx[0], g[0])};
  }
};
}  // namespace

TEST(Function, CustomForwardBackward) {
  Tensor x = tensor({1, 2});
  x.requires_grad_(true);
  Tensor y = Cube::apply(x, 2.0);
  ASSERT_TRUE(y.grad_fn());
  EXPECT_EQ(y.grad_fn()->name(), "CubeBackward");
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{6, 24}));
}

TEST(Function, GradcheckCustomFunction) {
  Generator g(3);
  Tensor a = rand({3}, TensorOptions(kFloat64), &g), b = rand({3}, TensorOptions(kFloat64), &g);
  a.requires_grad_(true);
  b.requires_grad_(true);
  auto r = autograd::gradcheck(
      [](const TensorList& x) {
        auto o = SumProd::apply(x[0], x[1]);
        return add(mul(o[0], 2.0), o[1]);
      },
      {a, b});
  EXPECT_TRUE(r.ok) << r.message;
  auto r2 = autograd::gradcheck([](const TensorList& x) { return Cube::apply(x[0], 0.5); }, {a});
  EXPECT_TRUE(r2.ok) << r2.message;
}

TEST(Function, NoGraphWhenInputsDoNotRequireGrad) {
  Tensor x = tensor({1, 2});
  Tensor y = Cube::apply(x, 1.0);
  EXPECT_FALSE(y.requires_grad());
}

TEST(Function, SavedTensorModifiedInPlaceIsReported) {
  Tensor x = tensor({1, 2});
  x.requires_grad_(true);
  Tensor h = mul(x, 1.0);
  Tensor y = Cube::apply(h, 1.0);
  native::add_(h, 1.0);
  EXPECT_THAT(support::error_of<Error>([&] { sum(y).backward(); }), ::testing::HasSubstr("modified by an inplace operation"));
}

TEST(Function, ReentrantBackwardDoesNotDeadlock) {
  Tensor x = tensor({1, 3});
  x.requires_grad_(true);
  sum(Reentrant::apply(x)).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2, 6}));
}

TEST(Function, WrongNumberOfGradientsIsAnError) {
  struct Bad : autograd::Function<Bad> {
    static Tensor forward(AutogradContext*, const Tensor& a, const Tensor& b) { return native::add(a, b); }
    static TensorList backward(AutogradContext*, TensorList g) { return {g[0]}; }
  };
  Tensor a = tensor({1}), b = tensor({2});
  a.requires_grad_(true);
  b.requires_grad_(true);
  EXPECT_THAT(support::error_of<Error>([&] { sum(Bad::apply(a, b)).backward(); }),
              ::testing::HasSubstr("incorrect number of gradients"));
}
