// CloneParameterSourceGuard (nn/module.h): while it is alive, clone(device) takes each
// parameter's data from the installed source when the source gives one (no copy of its own), and
// copies otherwise; buffers are always copied. DataParallel's policy built on it is tested in
// tests/parallel/replicate_parameters_test.cpp.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace ember::nn {
namespace {

TEST(CloneParameterSourceGuard, CloneTakesWhatTheSourceGives) {
  auto fc = std::make_shared<LinearImpl>(3, 2);
  Tensor given = full({2, 3}, 7.0, TensorOptions().device(Device::cpu(1)));
  const TensorImpl* weight = fc->weight.impl();
  std::vector<Device> asked;
  const detail::CloneParameterSource source = [&](const Tensor& original, Device device) {
    asked.push_back(device);
    return original.impl() == weight ? given : Tensor();
  };
  std::shared_ptr<LinearImpl> c;
  {
    detail::CloneParameterSourceGuard guard(&source);
    c = fc->clone_as(Device::cpu(1));
  }
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(asked, (std::vector<Device>{Device::cpu(1), Device::cpu(1)}));  // weight and bias, not buffers
  EXPECT_EQ(c->weight.device(), Device::cpu(1));
  EXPECT_EQ(c->weight.data_ptr<float>(), given.data_ptr<float>());  // its memory, not a copy
  EXPECT_EQ(c->weight.to_vector<float>(), std::vector<float>(6, 7.0f));
  EXPECT_TRUE(c->weight.requires_grad());
  EXPECT_TRUE(c->weight.is_leaf());
  EXPECT_NE(c->weight.impl(), given.impl());  // a parameter of its own over that memory
  // The source gave nothing for the bias: cloned from the original.
  EXPECT_NE(c->bias.data_ptr<float>(), fc->bias.data_ptr<float>());
  EXPECT_EQ(c->bias.to_vector<float>(), fc->bias.to_vector<float>());
}

TEST(CloneParameterSourceGuard, OutsideTheGuardCloneCopies) {
  auto fc = std::make_shared<LinearImpl>(3, 2);
  Tensor given = full({2, 3}, 7.0, TensorOptions().device(Device::cpu(1)));
  const detail::CloneParameterSource source = [&](const Tensor&, Device) { return given; };
  { detail::CloneParameterSourceGuard guard(&source); }
  EXPECT_EQ(detail::CloneParameterSourceGuard::current(), nullptr);
  auto c = fc->clone_as(Device::cpu(1));
  EXPECT_NE(c->weight.data_ptr<float>(), given.data_ptr<float>());
  EXPECT_EQ(c->weight.to_vector<float>(), fc->weight.to_vector<float>());
}

TEST(CloneParameterSourceGuard, GuardsNestAndANullSourceKeepsTheOuterOne) {
  const detail::CloneParameterSource outer = [](const Tensor&, Device) { return Tensor(); };
  detail::CloneParameterSourceGuard a(&outer);
  {
    detail::CloneParameterSourceGuard b(nullptr);
    EXPECT_EQ(detail::CloneParameterSourceGuard::current(), &outer);
  }
  EXPECT_EQ(detail::CloneParameterSourceGuard::current(), &outer);
}

}  // namespace
}  // namespace ember::nn
