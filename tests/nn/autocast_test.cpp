// Autocast (autograd/autocast.h, Note [Autocast op lists]): the dtype each op returns under
// bfloat16 and float16 autocast on CPU, products rounded as the low dtype's, gradients reaching
// float32 parameters in float32, float64 and integer tensors untouched, and the guard's
// thread-local, nesting state.
#include <gtest/gtest.h>

#include <thread>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/rnn.h"
#include "nn/utils/rnn.h"
#include "tests/nn/nn_test_util.h"

namespace ember::nn {
namespace {

using testing::all_close;
using testing::bit_equal;
using testing::error_of;
using testing::randn_seeded;

class AutocastDtype : public ::testing::TestWithParam<DType> {};

TEST_P(AutocastDtype, LowerPrecisionListReturnsTheAutocastDtype) {
  const DType low = GetParam();
  const Tensor a = randn_seeded({4, 3}, 1, kFloat32), b = randn_seeded({3, 5}, 2, kFloat32);
  const Tensor bias = randn_seeded({5}, 3, kFloat32), w = randn_seeded({5, 3}, 4, kFloat32);
  const Tensor batch = randn_seeded({2, 4, 3}, 5, kFloat32), batch2 = randn_seeded({2, 3, 5}, 6, kFloat32);
  autocast guard(DeviceType::CPU, low);
  EXPECT_EQ(mm(a, b).dtype(), low);
  EXPECT_EQ(matmul(a, b).dtype(), low);
  EXPECT_EQ(matmul(batch, b).dtype(), low);
  EXPECT_EQ(bmm(batch, batch2).dtype(), low);
  EXPECT_EQ(addmm(bias, a, b).dtype(), low);
  EXPECT_EQ(linear(a, w, bias).dtype(), low);
  EXPECT_EQ(F::linear(a, w).dtype(), low);
}

TEST_P(AutocastDtype, Float32ListWidensLowPrecisionInputs) {
  const DType low = GetParam();
  const Tensor x = native::to(randn_seeded({4, 6}, 7, kFloat32), low);
  const Tensor target = from_vector<int64_t>({0, 5, 2, 1});
  autocast guard(DeviceType::CPU, low);
  EXPECT_EQ(softmax(x, 1).dtype(), kFloat32);
  EXPECT_EQ(log_softmax(x, 1).dtype(), kFloat32);
  EXPECT_EQ(sum(x).dtype(), kFloat32);
  EXPECT_EQ(sum(x, {1}).dtype(), kFloat32);
  EXPECT_EQ(mean(x).dtype(), kFloat32);
  EXPECT_EQ(var(x).dtype(), kFloat32);
  EXPECT_EQ(norm(x).dtype(), kFloat32);
  EXPECT_EQ(exp(x).dtype(), kFloat32);
  EXPECT_EQ(log(abs(x)).dtype(), kFloat32);
  EXPECT_EQ(pow(x, 3.0).dtype(), kFloat32);
  EXPECT_EQ(F::cross_entropy(x, target).dtype(), kFloat32);
  EXPECT_EQ(F::nll_loss(x, target).dtype(), kFloat32);
  EXPECT_EQ(F::mse_loss(x, x).dtype(), kFloat32);
  EXPECT_EQ(F::layer_norm(x, {6}).dtype(), kFloat32);
  // Neither list: the input's dtype, and mixed operands promote to the wider type.
  EXPECT_EQ(relu(x).dtype(), low);
  EXPECT_EQ(tanh(x).dtype(), low);
  EXPECT_EQ(add(x, x).dtype(), low);
  EXPECT_EQ(add(x, randn_seeded({4, 6}, 8, kFloat32)).dtype(), kFloat32);
}

TEST_P(AutocastDtype, RnnLayersRunInTheAutocastDtype) {
  const DType low = GetParam();
  autocast guard(DeviceType::CPU, low);
  LSTMImpl lstm(LSTMOptions(3, 4).num_layers(2));
  const Tensor x = randn_seeded({5, 2, 3}, 9, kFloat32);
  auto [y, state] = lstm.forward(x);
  EXPECT_EQ(y.dtype(), low);
  EXPECT_EQ(std::get<0>(state).dtype(), low);
  EXPECT_EQ(std::get<1>(state).dtype(), low);
  GRUImpl gru(GRUOptions(3, 4));
  utils::rnn::PackedSequence packed = utils::rnn::pack_padded_sequence(x, std::vector<int64_t>{5, 3}, false);
  auto [py, ph] = gru.forward(packed);
  EXPECT_EQ(py.data.dtype(), low);
  EXPECT_EQ(ph.dtype(), low);
  RNNImpl rnn(RNNOptions(3, 4));
  EXPECT_EQ(std::get<0>(rnn.forward(x)).dtype(), low);
  for (const Tensor& p : lstm.parameters()) EXPECT_EQ(p.dtype(), kFloat32);  // the module is not converted
}

TEST_P(AutocastDtype, ProductIsTheFloat32ProductOfRoundedOperandsRoundedOnce) {
  const DType low = GetParam();
  const Tensor a = randn_seeded({7, 33}, 10, kFloat32), b = randn_seeded({33, 9}, 11, kFloat32);
  Tensor got;
  {
    autocast guard(DeviceType::CPU, low);
    got = mm(a, b);
  }
  const Tensor ra = native::to(native::to(a, low), kFloat32), rb = native::to(native::to(b, low), kFloat32);
  const Tensor expected = native::to(native::mm(ra, rb), low);
  EXPECT_TRUE(bit_equal(got, expected));
  // The low dtype's numbers, not float32's: rounding moved the result off the float32 product.
  EXPECT_FALSE(all_close(native::to(got, kFloat32), native::mm(a, b), 0, 1e-6));
  EXPECT_TRUE(all_close(native::to(got, kFloat32), native::mm(a, b), 0.05, 0.05));
}

TEST_P(AutocastDtype, GradientsReachFloat32ParametersInFloat32) {
  const DType low = GetParam();
  LinearImpl fc(6, 3);
  const Tensor x = randn_seeded({8, 6}, 12, kFloat32);
  const Tensor target = from_vector<int64_t>({0, 1, 2, 0, 1, 2, 0, 1});
  Tensor loss;
  {
    autocast guard(DeviceType::CPU, low);
    Tensor logits = fc.forward(x);
    EXPECT_EQ(logits.dtype(), low);
    loss = F::cross_entropy(logits, target);
  }
  EXPECT_EQ(loss.dtype(), kFloat32);
  loss.backward();
  ASSERT_TRUE(fc.weight.grad().defined());
  EXPECT_EQ(fc.weight.grad().dtype(), kFloat32);
  EXPECT_EQ(fc.bias.grad().dtype(), kFloat32);
  // Against the float32 gradient, to the low dtype's precision.
  LinearImpl ref(6, 3);
  {
    NoGradGuard no_grad;
    native::copy_(ref.weight, fc.weight);
    native::copy_(ref.bias, fc.bias);
  }
  F::cross_entropy(ref.forward(x), target).backward();
  const double tol = low == kBFloat16 ? 2e-2 : 2e-3;
  EXPECT_TRUE(all_close(fc.weight.grad(), ref.weight.grad(), tol, tol));
  EXPECT_TRUE(all_close(fc.bias.grad(), ref.bias.grad(), tol, tol));
  EXPECT_FALSE(bit_equal(fc.weight.grad(), ref.weight.grad()));
}

INSTANTIATE_TEST_SUITE_P(CPU, AutocastDtype, ::testing::Values(kBFloat16, kFloat16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Autocast, Float64AndIntegerTensorsAreNotCast) {
  const Tensor a = randn_seeded({3, 3}, 13, kFloat64);
  const Tensor i = from_vector<int64_t>({1, 2, 3, 4}, {2, 2});
  autocast guard(DeviceType::CPU);
  EXPECT_EQ(mm(a, a).dtype(), kFloat64);
  EXPECT_EQ(mm(i, i).dtype(), kInt64);
  EXPECT_EQ(softmax(a, 0).dtype(), kFloat64);
  EXPECT_EQ(sum(i).dtype(), kInt64);
}

TEST(Autocast, DefaultsToBfloat16OnCpuAndOnlyCastsItsDeviceType) {
  const Tensor a = randn_seeded({2, 2}, 14, kFloat32);
  {
    autocast guard(DeviceType::CPU);
    EXPECT_TRUE(autograd::AutocastMode::is_enabled(DeviceType::CPU));
    EXPECT_EQ(autograd::AutocastMode::dtype(DeviceType::CPU), kBFloat16);
    EXPECT_EQ(mm(a, a).dtype(), kBFloat16);
  }
  {
    autocast guard(DeviceType::CUDA);  // CUDA autocast leaves CPU tensors alone
    EXPECT_EQ(autograd::AutocastMode::dtype(DeviceType::CUDA), kFloat16);
    EXPECT_EQ(mm(a, a).dtype(), kFloat32);
  }
}

TEST(Autocast, GuardsNestAndRestoreThePreviousState) {
  const Tensor a = randn_seeded({2, 2}, 15, kFloat32);
  EXPECT_FALSE(autograd::AutocastMode::is_enabled(DeviceType::CPU));
  {
    autocast outer(DeviceType::CPU, kFloat16);
    {
      autocast off(DeviceType::CPU, kBFloat16, /*enabled=*/false);
      EXPECT_EQ(mm(a, a).dtype(), kFloat32);
    }
    EXPECT_EQ(mm(a, a).dtype(), kFloat16);
    {
      autocast inner(DeviceType::CPU, kBFloat16);
      EXPECT_EQ(mm(a, a).dtype(), kBFloat16);
    }
    EXPECT_EQ(autograd::AutocastMode::dtype(DeviceType::CPU), kFloat16);
  }
  EXPECT_FALSE(autograd::AutocastMode::is_enabled(DeviceType::CPU));
  EXPECT_EQ(mm(a, a).dtype(), kFloat32);
}

TEST(Autocast, StateIsThreadLocal) {
  autocast guard(DeviceType::CPU);
  bool other_enabled = true;
  std::thread t([&] { other_enabled = autograd::AutocastMode::is_enabled(DeviceType::CPU); });
  t.join();
  EXPECT_FALSE(other_enabled);
  EXPECT_TRUE(autograd::AutocastMode::is_enabled(DeviceType::CPU));
}

TEST(Autocast, RejectsDtypesOtherThanBfloat16AndFloat16) {
  const std::string e = error_of<ValueError>([] { autocast guard(DeviceType::CPU, kFloat64); });
  EXPECT_NE(e.find("autocast: expected dtype bfloat16 or float16, got float64"), std::string::npos) << e;
  EXPECT_FALSE(autograd::AutocastMode::is_enabled(DeviceType::CPU));
}

}  // namespace
}  // namespace ember::nn
