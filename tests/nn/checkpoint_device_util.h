// Checkpoints across devices (map_location-like loading): a model and Adam trained on one device,
// saved, and loaded into a fresh model on another device. Shared by checkpoint_test (cpu:0 <->
// cpu:1) and cuda_checkpoint_test (cuda:0 <-> cpu:0). Header-only.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/ops/factory.h"
#include "core/ops/random.h"
#include "nn/checkpoint.h"
#include "nn/container.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/optim/adam.h"
#include "nn/rnn.h"
#include "tests/nn/nn_test_util.h"

namespace ember::nn::testing {

struct DeviceModel {
  std::shared_ptr<EmbeddingImpl> emb = std::make_shared<EmbeddingImpl>(12, 5, 0);
  std::shared_ptr<LSTMImpl> lstm = std::make_shared<LSTMImpl>(LSTMOptions(5, 7));
  std::shared_ptr<LinearImpl> lin = std::make_shared<LinearImpl>(7, 3);
  std::shared_ptr<ModuleListImpl> holder = std::make_shared<ModuleListImpl>(emb, lstm, lin);
};

/// Trains 2 Adam steps on `from`, saves, loads into a fresh model + Adam on `to`, and checks
/// that every parameter and every Adam state tensor is on `to` and equal to what was saved.
inline void expect_checkpoint_moves(const Device& from, const Device& to, const std::string& path) {
  manual_seed(5);
  DeviceModel a;
  a.holder->to(from);
  optim::Adam opt(a.holder->parameters(), optim::AdamOptions(0.01));
  Generator g(3);
  Tensor tokens = randint(0, 12, {4, 2}, TensorOptions(kInt64), &g).to(from);
  Tensor targets = randint(0, 3, {2}, TensorOptions(kInt64), &g).to(from);
  for (int step = 0; step < 2; ++step) {
    opt.zero_grad();
    auto [out, state] = a.lstm->forward(a.emb->forward(tokens));
    Tensor logits = a.lin->forward(out.select(0, -1));
    F::cross_entropy(logits, targets).backward();
    opt.step();
  }
  save_checkpoint(path, *a.holder, &opt);

  manual_seed(77);  // other weights
  DeviceModel b;
  b.holder->to(to);
  optim::Adam opt_b(b.holder->parameters(), optim::AdamOptions(0.5));
  load_checkpoint(path, *b.holder, &opt_b);

  auto sa = a.holder->named_parameters(), sb = b.holder->named_parameters();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sb[i].second.device(), to) << sa[i].first;
    EXPECT_TRUE(bit_equal(sa[i].second.to(Device::cpu()), sb[i].second.to(Device::cpu()))) << sa[i].first;
  }
  auto oa = opt.state_dict(), ob = opt_b.state_dict();
  ASSERT_EQ(oa.state.size(), ob.state.size());
  for (auto& [idx, st] : oa.state) {
    for (auto& [key, t] : st) {
      const Tensor& loaded = ob.state.at(idx).at(key);
      EXPECT_EQ(loaded.device(), to) << idx << "." << key;
      EXPECT_TRUE(bit_equal(t.to(Device::cpu()), loaded.to(Device::cpu()))) << idx << "." << key;
    }
  }
}

}  // namespace ember::nn::testing
