// The model and optimizer the checkpoint fuzz target loads into, shared with make_seeds.cpp,
// which saves its checkpoints from the same structure (so seeds load and reach deep code).
#pragma once
#include <memory>

#include "autograd/ops.h"
#include "core/ops/random.h"
#include "nn/container.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/optim/adam.h"

namespace ember::fuzz {

struct SeedModel {
  std::shared_ptr<nn::SequentialImpl> net =
      std::make_shared<nn::SequentialImpl>(std::make_shared<nn::LinearImpl>(4, 3), std::make_shared<nn::LayerNormImpl>(IntList{3}));
  std::unique_ptr<optim::Adam> opt = std::make_unique<optim::Adam>(net->parameters());

  /// One Adam step on a fixed batch (creates or updates the optimizer state).
  void step() {
    Generator g(7);
    opt->zero_grad();
    Tensor loss = sum(net->forward(randn({2, 4}, {}, &g)));
    loss.backward();
    opt->step();
  }
};

}  // namespace ember::fuzz
