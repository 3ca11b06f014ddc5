// What the deterministic-mode tests of DataParallel and DistributedDataParallel share: a batch of
// kShards shards of kShardRows rows, the small network they train, the rows of each step, a
// bitwise comparison of parameters, and the shard-loss training run that DataParallel's option
// and a group-less DeterministicReducer must agree on (on CPU and CUDA devices alike).
// Header-only; tests only.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/ops/native.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/optim/adam.h"
#include "parallel/data_parallel.h"
#include "parallel/deterministic_reducer.h"

namespace ember::parallel::test {

constexpr int kShards = 8;
constexpr int64_t kShardRows = 5;

struct Net : nn::Cloneable<Net> {
  std::shared_ptr<nn::LinearImpl> fc1, fc2;
  Net() : Cloneable("Net") { reset(); }
  void reset() override {
    fc1 = register_module("fc1", std::make_shared<nn::LinearImpl>(6, 32));
    fc2 = register_module("fc2", std::make_shared<nn::LinearImpl>(32, 3));
  }
  Tensor forward(const Tensor& x) { return fc2->forward(tanh(fc1->forward(x))); }
};

/// Step `step`'s [n, cols] rows drawn from seed + step, scaled by 1, 2 or 3 so magnitudes vary by step.
inline Tensor rows(uint64_t seed, int step, int64_t n, int64_t cols) {
  Generator g(seed + static_cast<uint64_t>(step));
  Tensor t = randn({n, cols}, {}, &g);
  return native::mul(t, scalar_tensor(static_cast<double>(step % 3 + 1)));
}

using Bits = std::vector<std::vector<float>>;

/// Whether a and b hold the same tensors bit for bit.
inline bool same_bits(const Bits& a, const Bits& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return false;
  }
  return true;
}

// One shard's own mean loss, shape [1] so that DataParallel gathers the shards' losses.
struct ShardLoss : nn::Cloneable<ShardLoss> {
  std::shared_ptr<Net> net;
  ShardLoss() : Cloneable("ShardLoss") { reset(); }
  void reset() override { net = register_module("net", std::make_shared<Net>()); }
  Tensor forward(const Tensor& x, const Tensor& y) {
    return ember::unsqueeze(nn::functional::mse_loss(net->forward(x), y), 0);
  }
};

/// `steps` Adam steps over kShards shards of their own mean losses, the model on `model_device`:
/// DataParallel with its deterministic option and average_shards over `devices`, or (devices
/// empty) one process running the shards one by one under a group-less DeterministicReducer.
/// Returns the parameters.
inline Bits train_shard_losses(const std::vector<Device>& devices, int steps, Device model_device = Device::cpu()) {
  manual_seed(7);
  auto model = std::make_shared<ShardLoss>();
  model->to(model_device);
  optim::Adam adam(model->parameters(), optim::AdamOptions(0.01));
  std::unique_ptr<DataParallel<ShardLoss>> dp;
  std::unique_ptr<DeterministicReducer> reducer;
  if (!devices.empty()) {
    DataParallelOptions o;
    o.devices = devices;
    o.deterministic = true;
    o.num_shards = kShards;
    o.average_shards = true;
    dp = std::make_unique<DataParallel<ShardLoss>>(model, o);
  } else {
    std::vector<std::string> names;
    for (auto& [name, p] : model->named_parameters()) names.push_back(name);
    reducer = std::make_unique<DeterministicReducer>(model->parameters(), names, nullptr,
                                                     DeterministicReducerOptions{.num_shards = kShards});
  }
  for (int s = 0; s < steps; ++s) {
    adam.zero_grad();
    const Tensor x = native::to(rows(100, s, kShards * kShardRows, 6), model_device);
    const Tensor y = native::to(rows(900, s, kShards * kShardRows, 3), model_device);
    if (dp) {
      ember::sum((*dp)(x, y)).backward();
    } else {
      for (int k = 0; k < kShards; ++k) {
        reducer->set_sync(k + 1 == kShards);
        reducer->prepare_for_backward(nullptr);
        ember::sum(model->forward(native::narrow(x, 0, k * kShardRows, kShardRows),
                                  native::narrow(y, 0, k * kShardRows, kShardRows)))
            .backward();
      }
    }
    adam.step();
  }
  Bits out;
  for (const Tensor& p : model->parameters()) out.push_back(native::to(p, Device::cpu()).to_vector<float>());
  return out;
}

}  // namespace ember::parallel::test
