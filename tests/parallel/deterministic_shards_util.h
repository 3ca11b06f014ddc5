// What the deterministic-mode tests of DataParallel and DistributedDataParallel share: a batch of
// kShards shards of kShardRows rows, the small network they train, the rows of each step, and a
// bitwise comparison of parameters. Header-only; tests only.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/ops/native.h"
#include "nn/linear.h"

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

}  // namespace ember::parallel::test
