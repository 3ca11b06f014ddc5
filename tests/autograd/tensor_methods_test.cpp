// Tensor's LibTorch-style methods (Note [Tensor methods] in core/tensor.h): each gives what the
// free function gives, records the same history, and the in-place ones write through any handle.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "core/ops/native.h"
#include "tests/support/error_text.h"
#include "tests/support/fake_pinned_backend.h"

using namespace ember;
using ::testing::HasSubstr;

namespace {
std::vector<float> vec(const Tensor& t) { return t.to_vector<float>(); }
Tensor grid() { return reshape(arange(0.0, 12.0, 1.0, kFloat32), {3, 4}); }  // [[0..3], [4..7], [8..11]]
}  // namespace

TEST(TensorMethods, ViewsMatchFreeFunctionsAndShareStorage) {
  Tensor x = grid();
  EXPECT_EQ(x.view({4, 3}).sizes(), (IntList{4, 3}));
  EXPECT_EQ(x.view({4, 3}).storage().data(), x.storage().data());
  EXPECT_EQ(vec(x.t()), vec(contiguous(t(x))));
  EXPECT_EQ(vec(x.transpose(0, 1).contiguous()), vec(contiguous(transpose(x, 0, 1))));
  EXPECT_EQ(vec(x.permute({1, 0}).contiguous()), vec(contiguous(t(x))));
  EXPECT_EQ(vec(x.narrow(1, 1, 2)), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  EXPECT_EQ(vec(x.select(0, 2)), (std::vector<float>{8, 9, 10, 11}));
  EXPECT_EQ(vec(x[1]), (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(vec(x.slice(1, 0, 4, 2)), (std::vector<float>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(x.unsqueeze(0).sizes(), (IntList{1, 3, 4}));
  EXPECT_EQ(x.unsqueeze(0).squeeze(0).sizes(), (IntList{3, 4}));
  EXPECT_EQ(x.reshape({-1}).sizes(), (IntList{12}));
  EXPECT_EQ(x.flatten().sizes(), (IntList{12}));
  EXPECT_EQ(x.select(0, 0).expand({2, 4}).sizes(), (IntList{2, 4}));
  EXPECT_EQ(x.chunk(3, 0).size(), 3u);
  EXPECT_EQ(x.split(2, 1)[1].sizes(), (IntList{3, 2}));
  EXPECT_EQ(x.size(0), 3);
  EXPECT_EQ(x.dim(), 2);
  EXPECT_EQ(x.numel(), 12);
}

TEST(TensorMethods, ReductionsAndSoftmax) {
  Tensor x = grid();
  EXPECT_EQ(x.sum().item(), 66.0);
  EXPECT_EQ(vec(x.sum(1)), (std::vector<float>{6, 22, 38}));
  EXPECT_EQ(vec(x.sum({0, 1})), (std::vector<float>{66}));
  EXPECT_EQ(x.sum(0, /*keepdim=*/true).sizes(), (IntList{1, 4}));
  EXPECT_EQ(x.mean().item(), 5.5);
  EXPECT_EQ(vec(x.mean(0)), (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(x.max().item(), 11.0);
  EXPECT_EQ(x.min().item(), 0.0);
  auto [values, indices] = x.max(1);
  EXPECT_EQ(vec(values), (std::vector<float>{3, 7, 11}));
  EXPECT_EQ(indices.to_vector<int64_t>(), (std::vector<int64_t>{3, 3, 3}));
  EXPECT_EQ(x.argmax().item<int64_t>(), 11);
  EXPECT_EQ(x.argmax(0).to_vector<int64_t>(), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(vec(x.softmax(1)), vec(softmax(x, 1)));
  EXPECT_EQ(vec(x.log_softmax(1)), vec(log_softmax(x, 1)));
  EXPECT_NEAR(x.softmax(1).sum(1).to_vector<double>()[2], 1.0, 1e-6);
}

TEST(TensorMethods, ArithmeticAndComparisons) {
  Tensor a = tensor({1, 2, 3}), b = tensor({4, 5, 6});
  EXPECT_EQ(vec(a.add(b)), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(vec(a.add(b, 2.0)), (std::vector<float>{9, 12, 15}));
  EXPECT_EQ(vec(a.sub(b)), (std::vector<float>{-3, -3, -3}));
  EXPECT_EQ(vec(a.mul(b)), (std::vector<float>{4, 10, 18}));
  EXPECT_EQ(vec(b.div(a)), (std::vector<float>{4, 2.5, 2}));
  EXPECT_EQ(vec(a.add(1.0).mul(2.0).sub(1.0).div(2.0)), (std::vector<float>{1.5, 2.5, 3.5}));
  EXPECT_EQ(vec(a.pow(2.0)), (std::vector<float>{1, 4, 9}));
  EXPECT_EQ(vec(a.neg().abs()), vec(a));
  EXPECT_EQ(vec(a.clamp(1.5, 2.5)), (std::vector<float>{1.5, 2, 2.5}));
  EXPECT_EQ(vec(a.neg().relu()), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(a.gt(1.5).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(a.eq(b.sub(3.0)).to_vector<bool>(), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(vec(a.masked_fill(a.lt(2.0), -1)), (std::vector<float>{-1, 2, 3}));
  EXPECT_EQ(vec(grid().matmul(ones({4, 1}))), (std::vector<float>{6, 22, 38}));
  Tensor c = a;
  c -= 1.0;
  c /= 2.0;
  EXPECT_EQ(vec(c), (std::vector<float>{0, 0.5, 1}));
  EXPECT_EQ(vec(a), (std::vector<float>{1, 2, 3}));  // compound operators rebind, never write a's data
}

TEST(TensorMethods, MethodsRecordTheSameHistoryAsFreeFunctions) {
  Tensor w = tensor({1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor loss = w.t().mul(w).sum();  // sum_ij w_ji w_ij: d/dw = 2 w^T
  loss.backward();
  EXPECT_EQ(vec(w.grad()), (std::vector<float>{2, 6, 4, 8}));
  Tensor h = w.mul(2.0);
  Tensor d = h.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_EQ(d.storage().data(), h.storage().data());
  EXPECT_TRUE(w.to(kFloat64).requires_grad());
  EXPECT_EQ(w.to(kFloat64).dtype(), kFloat64);
  EXPECT_EQ(w.to(Device("cpu:1")).device(), Device("cpu:1"));
  EXPECT_EQ(w.cpu().device(), Device::cpu());
  EXPECT_TRUE(w.clone().grad_fn() != nullptr);
}

TEST(TensorMethods, InPlaceMethodsWriteThroughConstHandles) {
  const Tensor x = zeros({3});
  x.add_(tensor({1, 2, 3})).mul_(2.0).add_(1.0);
  EXPECT_EQ(vec(x), (std::vector<float>{3, 5, 7}));
  x.sub_(ones({3}), 3.0);
  EXPECT_EQ(vec(x), (std::vector<float>{0, 2, 4}));
  x.masked_fill_(x.gt(1.0), 9);
  EXPECT_EQ(vec(x), (std::vector<float>{0, 9, 9}));
  x.fill_(7).copy_(tensor({1, 1, 2}));
  EXPECT_EQ(vec(x), (std::vector<float>{1, 1, 2}));
  x.zero_();
  EXPECT_EQ(vec(x), (std::vector<float>{0, 0, 0}));
}

TEST(TensorMethods, InPlaceMethodOnNonLeafRecordsHistory) {
  Tensor w = tensor({1, 2}).requires_grad_();
  Tensor y = w.mul(3.0);
  y.add_(w, 2.0).mul_(2.0);  // y = 10 w
  y.sum().backward();
  EXPECT_EQ(vec(w.grad()), (std::vector<float>{10, 10}));
  EXPECT_THAT(support::error_of([&] { w.add_(1.0); }), HasSubstr("a leaf Variable that requires grad"));
}

TEST(TensorMethods, PinMemoryIsDifferentiableOverAFakePinnedBackend) {
  test_support::ScopedFakePinnedAllocator fake;  // Note [Pinned host memory] without CUDA
  Tensor w = tensor({1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor p = w.pin_memory();
  EXPECT_TRUE(p.is_pinned());
  EXPECT_FALSE(w.is_pinned());
  EXPECT_EQ(vec(p), vec(w));
  ASSERT_TRUE(p.grad_fn() != nullptr);
  EXPECT_EQ(p.grad_fn()->name(), "PinMemoryBackward0");
  EXPECT_TRUE(pin_memory(p).is_same(p)) << "the free function returns an already pinned tensor itself";
  p.mul(3.0).sum().backward();
  EXPECT_EQ(vec(w.grad()), (std::vector<float>{3, 3, 3, 3}));
}

TEST(TensorMethods, NonBlockingCopiesBetweenCpuDevicesAreOrdinaryCopies) {
  const Tensor x = tensor({1, 2, 3});
  const Tensor y = x.to(Device("cpu:1"), /*non_blocking=*/true);
  EXPECT_EQ(y.device(), Device("cpu:1"));
  EXPECT_EQ(vec(y), vec(x));
  EXPECT_EQ(x.to(Device("cpu:1"), kFloat64, true).dtype(), kFloat64);
  const Tensor z = zeros({3});
  z.copy_(x, /*non_blocking=*/true);
  EXPECT_EQ(vec(z), vec(x));
}
