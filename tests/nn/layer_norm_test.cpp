// nn::LayerNorm / F::layer_norm: normalized rows, fused CPU kernel vs the composite reference
// (values and all three gradients), float64 gradcheck over one and two normalized dims,
// elementwise_affine=false, and PyTorch's shape error.
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/functional.h"
#include "nn/layer_norm.h"
#include "tests/nn/nn_test_util.h"

namespace ember::nn {
namespace {

using testing::all_close;
using testing::leaf;
using testing::randn_seeded;

TEST(LayerNorm, DefaultParametersNormalizeEachRow) {
  LayerNormImpl ln({8});
  EXPECT_EQ(ln.weight.to_vector<float>(), std::vector<float>(8, 1.0f));
  EXPECT_EQ(ln.bias.to_vector<float>(), std::vector<float>(8, 0.0f));
  Tensor x = native::add(native::mul(randn_seeded({3, 8}, 1, kFloat32), 5.0), 2.0);
  auto y = ln.forward(x).to_vector<double>();
  for (int r = 0; r < 3; ++r) {
    double m = 0, v = 0;
    for (int j = 0; j < 8; ++j) m += y[r * 8 + j] / 8;
    for (int j = 0; j < 8; ++j) v += (y[r * 8 + j] - m) * (y[r * 8 + j] - m) / 8;
    EXPECT_NEAR(m, 0.0, 1e-6);
    EXPECT_NEAR(v, 1.0, 1e-3);  // eps = 1e-5 on a variance of ~25
  }
}

TEST(LayerNorm, FusedKernelMatchesCompositeReference) {
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x1 = leaf(randn_seeded({4, 3, 5}, 2, dt)), x2 = leaf(x1);
    Tensor w1 = leaf(randn_seeded({3, 5}, 3, dt)), w2 = leaf(w1);
    Tensor b1 = leaf(randn_seeded({3, 5}, 4, dt)), b2 = leaf(b1);
    Tensor up = randn_seeded({4, 3, 5}, 5, dt);
    Tensor y1 = F::layer_norm(x1, {3, 5}, w1, b1, 1e-5);
    Tensor y2 = F::detail::layer_norm_reference(x2, {3, 5}, w2, b2, 1e-5);
    const double tol = dt == kFloat32 ? 1e-5 : 1e-12;
    EXPECT_TRUE(all_close(y1, y2, tol, tol));
    sum(mul(y1, up)).backward();
    sum(mul(y2, up)).backward();
    EXPECT_TRUE(all_close(x1.grad(), x2.grad(), tol, tol));
    EXPECT_TRUE(all_close(w1.grad(), w2.grad(), tol, tol));
    EXPECT_TRUE(all_close(b1.grad(), b2.grad(), tol, tol));
  }
}

TEST(LayerNorm, GradcheckFloat64) {
  Tensor x = leaf(randn_seeded({3, 2, 4}, 6));
  Tensor w = leaf(randn_seeded({4}, 7)), b = leaf(randn_seeded({4}, 8));
  auto r = autograd::gradcheck(
      [](const autograd::TensorList& in) { return F::layer_norm(in[0], {4}, in[1], in[2]); }, {x, w, b});
  EXPECT_TRUE(r.ok) << r.message;
  Tensor x2 = leaf(randn_seeded({2, 3, 4}, 9));
  auto r2 = autograd::gradcheck([](const autograd::TensorList& in) { return F::layer_norm(in[0], {3, 4}); }, {x2});
  EXPECT_TRUE(r2.ok) << r2.message;
}

TEST(LayerNorm, WithoutElementwiseAffineHasNoParameters) {
  LayerNormImpl ln({4}, 1e-5, false);
  EXPECT_TRUE(ln.parameters().empty());
  Tensor x = randn_seeded({2, 4}, 10, kFloat32);
  EXPECT_TRUE(all_close(ln.forward(x), F::detail::layer_norm_reference(x, {4}, Tensor(), Tensor(), 1e-5), 1e-5,
                        1e-6));
}

TEST(LayerNorm, ShapeMismatchInPyTorchWords) {
  LayerNormImpl ln({4});
  std::string msg = testing::error_of([&] { ln.forward(ones({2, 3})); });
  EXPECT_NE(msg.find("Given normalized_shape=[4], expected input with shape [*, 4], but got input of size[2, 3]"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace ember::nn
