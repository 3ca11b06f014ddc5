// DataParallel's replica parameter policy (parallel/replicate_parameters.h, Note [Replica
// parameters] in parallel/replicate.cpp): CPU replicas alias the original's parameters, given
// broadcast copies are taken on their device, buffers and everything else are copied.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "parallel/replicate_parameters.h"

namespace ember::parallel {
namespace {

struct WithBuffer : nn::Cloneable<WithBuffer> {
  Tensor w, running;
  WithBuffer() { reset(); }
  void reset() override {
    w = register_parameter("w", full({4}, 2.0));
    running = register_buffer("running", full({4}, 3.0));
  }
};

TEST(ReplicaParametersGuard, CpuReplicasAliasParametersAndCopyBuffers) {
  WithBuffer m;
  std::shared_ptr<WithBuffer> c;
  {
    detail::ReplicaParametersGuard guard(nullptr, /*share_cpu=*/true);
    c = m.clone_as(Device::cpu(1));
  }
  EXPECT_EQ(c->w.device(), Device::cpu(1));
  EXPECT_EQ(c->w.data_ptr<float>(), m.w.data_ptr<float>());  // the original's memory
  EXPECT_TRUE(c->w.is_leaf());
  EXPECT_NE(c->running.data_ptr<float>(), m.running.data_ptr<float>());  // a replica may write it
  EXPECT_EQ(c->running.to_vector<float>(), m.running.to_vector<float>());
  // The alias shares the version counter: an in-place change of the original shows.
  const uint32_t before = c->w.version();
  {
    autograd::NoGradGuard no_grad;
    native::add_(m.w, full({4}, 1.0));
  }
  EXPECT_GT(c->w.version(), before);
  EXPECT_EQ(c->w.to_vector<float>(), std::vector<float>(4, 3.0f));
}

TEST(ReplicaParametersGuard, TakesTheGivenCopyOnItsDeviceOnly) {
  auto fc = std::make_shared<nn::LinearImpl>(3, 2);
  Tensor given = full({2, 3}, 7.0, TensorOptions().device(Device::cpu(1)));
  const detail::ParameterCopies copies{{fc->weight.impl(), given}};
  {
    detail::ReplicaParametersGuard guard(&copies, /*share_cpu=*/false);
    auto c = fc->clone_as(Device::cpu(1));
    EXPECT_EQ(c->weight.data_ptr<float>(), given.data_ptr<float>());
    EXPECT_NE(c->bias.data_ptr<float>(), fc->bias.data_ptr<float>());  // no copy given: cloned
    EXPECT_EQ(c->bias.to_vector<float>(), fc->bias.to_vector<float>());
    auto other = fc->clone_as(Device::cpu(2));  // the copy is on cpu:1
    EXPECT_NE(other->weight.data_ptr<float>(), given.data_ptr<float>());
    EXPECT_EQ(other->weight.to_vector<float>(), fc->weight.to_vector<float>());
  }
  auto after = fc->clone_as(Device::cpu(1));  // outside the guard: copies
  EXPECT_NE(after->weight.data_ptr<float>(), given.data_ptr<float>());
}

}  // namespace
}  // namespace ember::parallel
