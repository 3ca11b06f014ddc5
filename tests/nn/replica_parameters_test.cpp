// ReplicaParametersGuard (Note [Replica parameter broadcast] in parallel/replicate.cpp): while it
// is alive, clone(device) takes the parameter copies it is handed (no copy of its own); other
// parameters, copies on other devices and everything outside the guard are copied as before.
// DataParallel's use of it (NCCL across GPUs) is data_parallel_multi_gpu_test's (gpu label).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "nn/detail/replica_parameters.h"
#include "nn/linear.h"

namespace ember::nn {
namespace {

TEST(ReplicaParametersGuard, CloneTakesTheGivenCopyOfAParameter) {
  auto fc = std::make_shared<LinearImpl>(3, 2);
  Tensor given = full({2, 3}, 7.0, TensorOptions().device(Device::cpu(1)));
  detail::ParameterCopies copies{{fc->weight.impl(), given}};
  std::shared_ptr<LinearImpl> c;
  {
    detail::ReplicaParametersGuard guard(&copies);
    c = fc->clone_as(Device::cpu(1));
  }
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->weight.device(), Device::cpu(1));
  EXPECT_EQ(c->weight.data_ptr<float>(), given.data_ptr<float>());  // its memory, not a copy
  EXPECT_EQ(c->weight.to_vector<float>(), std::vector<float>(6, 7.0f));
  EXPECT_TRUE(c->weight.requires_grad());
  EXPECT_TRUE(c->weight.is_leaf());
  EXPECT_NE(c->weight.impl(), given.impl());  // a parameter of its own over that memory
  // The bias had no copy: cloned from the original.
  EXPECT_NE(c->bias.data_ptr<float>(), fc->bias.data_ptr<float>());
  EXPECT_EQ(c->bias.to_vector<float>(), fc->bias.to_vector<float>());
}

TEST(ReplicaParametersGuard, ACopyOnAnotherDeviceIsNotTaken) {
  auto fc = std::make_shared<LinearImpl>(3, 2);
  Tensor given = full({2, 3}, 7.0, TensorOptions().device(Device::cpu(2)));
  detail::ParameterCopies copies{{fc->weight.impl(), given}};
  detail::ReplicaParametersGuard guard(&copies);
  auto c = fc->clone_as(Device::cpu(1));
  EXPECT_NE(c->weight.data_ptr<float>(), given.data_ptr<float>());
  EXPECT_EQ(c->weight.to_vector<float>(), fc->weight.to_vector<float>());
}

TEST(ReplicaParametersGuard, OutsideTheGuardCloneCopies) {
  auto fc = std::make_shared<LinearImpl>(3, 2);
  Tensor given = full({2, 3}, 7.0, TensorOptions().device(Device::cpu(1)));
  detail::ParameterCopies copies{{fc->weight.impl(), given}};
  { detail::ReplicaParametersGuard guard(&copies); }
  auto c = fc->clone_as(Device::cpu(1));
  EXPECT_EQ(c->weight.to_vector<float>(), fc->weight.to_vector<float>());
  EXPECT_EQ(detail::ReplicaParametersGuard::find(fc->weight, Device::cpu(1)), nullptr);
}

}  // namespace
}  // namespace ember::nn
