// ember::tensor(...): LibTorch's torch::tensor from a std::vector (dtype from the element type)
// and from (nested) initializer lists.
#include <gtest/gtest.h>

#include "core/ops/factory.h"

using namespace ember;

TEST(TensorLiteral, VectorDtypeFollowsElementType) {
  EXPECT_EQ(tensor(std::vector<float>{1.5f, 2}).dtype(), kFloat32);
  EXPECT_EQ(tensor(std::vector<double>{1.5, 2}).dtype(), kFloat64);
  EXPECT_EQ(tensor(std::vector<int64_t>{1, 2}).dtype(), kInt64);
  EXPECT_EQ(tensor(std::vector<int32_t>{1, 2}).dtype(), kInt32);
  EXPECT_EQ(tensor(std::vector<bool>{true, false}).dtype(), kBool);
  Tensor t = tensor(std::vector<int64_t>{3, -1, 4});
  EXPECT_EQ(t.sizes(), (IntList{3}));
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{3, -1, 4}));
}

TEST(TensorLiteral, OptionsOverrideDtypeAndSetDeviceAndGrad) {
  Tensor t = tensor(std::vector<int64_t>{1, 2}, TensorOptions(kFloat64).device("cpu:1").requires_grad());
  EXPECT_EQ(t.dtype(), kFloat64);
  EXPECT_EQ(t.device(), Device("cpu:1"));
  EXPECT_TRUE(t.requires_grad());
  // Options without a dtype keep the inferred one.
  EXPECT_EQ(tensor(std::vector<double>{1}, TensorOptions().device("cpu:1")).dtype(), kFloat64);
}

TEST(TensorLiteral, InitializerLists) {
  EXPECT_EQ(tensor({1, 2, 3}).dtype(), kFloat32);
  EXPECT_EQ(tensor({1, 2, 3}, kInt64).dtype(), kInt64);
  EXPECT_EQ(tensor({1, 2, 3}, kInt64).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
  Tensor m = tensor({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(m.sizes(), (IntList{2, 3}));
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_THROW(tensor({{1, 2}, {3}}), ValueError);
}
