// The kernels under the deterministic mode (docs/DETERMINISM.md, "Kernels and threads"). The
// mode changes one op: how the shards' gradients are combined (the exact fixed-point sum,
// detail::exact_sum, the same code as DeterministicReducer's and DataParallel's option); it is
// bit-equal for every order and grouping of the shards (their placement over ranks or devices)
// and every thread count, and equals the ordinary float sum within float tolerance. Every other
// kernel a shard runs is the ordinary kernel, and the mode relies on it being invariant: each
// here (reductions over leading and trailing dims with vector tails, matrix products with a long
// K as in a weight gradient, the packed LSTM forward and backward with its recurrent GEMM,
// embedding backward over repeated indices, cross_entropy with ignored targets, clip_grad_norm_,
// Adam) gives the same bits for 1, 2, 3 and 4 intra-op threads and on another CPU logical device
// under use_deterministic_algorithms(true); OpenBLAS's products need the mode for it (Note
// [Deterministic GEMM] in core/kernels/cpu/blas_gemm.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/deterministic.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/thread_pool.h"
#include "nn/functional.h"
#include "nn/optim/adam.h"
#include "nn/rnn.h"
#include "nn/utils/clip_grad.h"
#include "nn/utils/rnn.h"
#include "parallel/deterministic_reducer.h"

namespace ember {
namespace {

using Bits = std::vector<std::vector<uint8_t>>;

Bits bits_of(const std::vector<Tensor>& ts) {
  Bits out;
  for (const Tensor& t : ts) {
    const Tensor c = native::contiguous(native::to(t, Device::cpu(0)));
    const auto* p = static_cast<const uint8_t*>(c.raw_data());
    out.emplace_back(p, p + c.nbytes());
  }
  return out;
}

// Under use_deterministic_algorithms(true), runs `op(device)` with 1, 2, 3 and 4 intra-op threads on cpu:0 and with 2 threads on cpu:5;
// every run must give the bits of the first.
void expect_invariant(const std::string& name, const std::function<std::vector<Tensor>(Device)>& op) {
  DeterministicAlgorithmsGuard mode(true);
  const int before = get_num_threads();
  set_num_threads(1);
  const Bits ref = bits_of(op(Device::cpu(0)));
  ASSERT_FALSE(ref.empty()) << name;
  for (int threads : {2, 3, 4}) {
    set_num_threads(threads);
    EXPECT_TRUE(bits_of(op(Device::cpu(0))) == ref) << name << ": " << threads << " threads";
  }
  set_num_threads(2);
  EXPECT_TRUE(bits_of(op(Device::cpu(5))) == ref) << name << ": on cpu:5";
  set_num_threads(before);
}

Tensor data(std::vector<int64_t> sizes, uint64_t seed, Device device, bool grad = false) {
  Generator g(seed);
  Tensor t = native::to(randn(sizes, {}, &g), device);
  if (grad) t.requires_grad_(true);
  return t;
}

TEST(DeterministicKernels, ReductionsAreThreadAndPlacementInvariant) {
  expect_invariant("sum/mean over leading, trailing and all dims", [](Device d) {
    const Tensor x = data({1031, 67}, 1, d);
    const Tensor big = data({(1 << 20) + 7}, 2, d);
    return std::vector<Tensor>{ember::sum(x, {0}), ember::sum(x, {1}), ember::mean(x, {0}), ember::sum(big),
                               ember::mean(big)};
  });
}

TEST(DeterministicKernels, MatrixProductsAndWeightGradientsAreThreadAndPlacementInvariant) {
  expect_invariant("linear forward and backward, batch 4099", [](Device d) {
    const Tensor x = data({4099, 131}, 3, d, true), w = data({67, 131}, 4, d, true), b = data({67}, 5, d, true);
    const Tensor y = ember::linear(x, w, b);
    ember::sum(ember::mul(y, data({4099, 67}, 6, d))).backward();
    return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad()};
  });
  expect_invariant("matmul with K 3001", [](Device d) {
    return std::vector<Tensor>{ember::matmul(data({33, 3001}, 7, d), data({3001, 45}, 8, d))};
  });
}

TEST(DeterministicKernels, PackedLstmIsThreadAndPlacementInvariant) {
  expect_invariant("2-layer LSTM over a packed batch, forward and backward", [](Device d) {
    manual_seed(9);
    nn::LSTMImpl lstm(nn::LSTMOptions(19, 96).num_layers(2).batch_first(true));
    lstm.to(d);
    std::vector<int64_t> lengths(37);
    for (size_t i = 0; i < lengths.size(); ++i) lengths[i] = 3 + static_cast<int64_t>((i * 7) % 23);
    const Tensor x = data({37, 25, 19}, 10, d, true);
    auto packed = nn::utils::rnn::pack_padded_sequence(x, lengths, true, false);
    auto [out, state] = lstm.forward(packed);
    auto [y, lens] = nn::utils::rnn::pad_packed_sequence(out, true, 0.0, 25);
    ember::sum(ember::mul(y, data({37, 25, 96}, 11, d))).backward();
    std::vector<Tensor> r{y, x.grad()};
    for (const Tensor& p : lstm.parameters()) r.push_back(p.grad());
    return r;
  });
}

TEST(DeterministicKernels, EmbeddingLossClipAndAdamAreThreadAndPlacementInvariant) {
  expect_invariant("embedding backward over repeated indices", [](Device d) {
    const Tensor w = data({50, 33}, 12, d, true);
    Generator g(13);
    const Tensor idx = native::to(randint(0, 50, {997}, TensorOptions(kInt64), &g), d);
    const Tensor y = nn::functional::embedding(idx, w, 0);
    ember::sum(ember::mul(y, data({997, 33}, 14, d))).backward();
    return std::vector<Tensor>{y, w.grad()};
  });
  expect_invariant("cross_entropy with ignored targets, forward and backward", [](Device d) {
    const Tensor logits = data({1023, 77}, 15, d, true);
    Generator g(16);
    Tensor targets = randint(0, 77, {1023}, TensorOptions(kInt64), &g);
    auto tv = targets.to_vector<int64_t>();
    for (size_t i = 0; i < tv.size(); i += 5) tv[i] = -100;
    nn::functional::CrossEntropyOptions ce;
    ce.ignore_index = -100;
    const Tensor loss = nn::functional::cross_entropy(logits, native::to(from_vector<int64_t>(tv, {1023}), d), ce);
    loss.backward();
    return std::vector<Tensor>{loss, logits.grad()};
  });
  expect_invariant("clip_grad_norm_ and an Adam step", [](Device d) {
    std::vector<Tensor> params{data({300001}, 17, d, true), data({77, 129}, 18, d, true), data({5}, 19, d, true)};
    for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(data(params[i].sizes(), 20 + i, d));
    const double norm = nn::utils::clip_grad_norm_(params, 0.5);
    optim::Adam adam(params, optim::AdamOptions(0.01));
    adam.step();
    std::vector<Tensor> r{scalar_tensor(norm, TensorOptions(kFloat64))};
    for (const Tensor& p : params) r.push_back(ember::detach(p));
    return r;
  });
}

// The op the mode changes: the same bits for every order and grouping of the shards and every
// thread count, within float tolerance of the float sum.
TEST(DeterministicKernels, ExactShardSumIsPlacementInvariantAndCloseToTheFloatSum) {
  constexpr int kShards = 8;
  std::vector<Tensor> shards;
  for (int s = 0; s < kShards; ++s) {
    // magnitudes spread over binades, so the float sum depends on its order
    shards.push_back(native::mul(data({70001}, 30 + s, Device::cpu(0)), scalar_tensor(std::ldexp(1.0, (s * 5) % 17 - 8))));
  }
  std::vector<std::vector<float>> values;
  for (const Tensor& t : shards) values.push_back(t.to_vector<float>());
  const int before = get_num_threads();
  set_num_threads(1);
  const Tensor ref = parallel::detail::exact_sum(shards, kShards, kShards, Device::cpu(0));
  std::mt19937 rng(5);
  bool float_order_mattered = false;
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<Tensor> order = shards;
    std::shuffle(order.begin(), order.end(), rng);
    set_num_threads(1 + trial % 4);
    const Tensor got = parallel::detail::exact_sum(order, kShards, kShards, Device::cpu(0));
    EXPECT_TRUE(bits_of({got}) == bits_of({ref})) << "order " << trial << ", " << 1 + trial % 4 << " threads";
    // The float sums of the same shards in that order, grouped as 3 + 3 + 2 ranks would.
    Tensor a = native::add(native::add(order[0], order[1]), order[2]);
    Tensor b = native::add(native::add(order[3], order[4]), order[5]);
    Tensor c = native::add(order[6], order[7]);
    const Tensor fsum = native::div(native::add(native::add(a, b), c), scalar_tensor(double{kShards}));
    Tensor plain = shards[0];
    for (int s = 1; s < kShards; ++s) plain = native::add(plain, shards[static_cast<size_t>(s)]);
    plain = native::div(plain, scalar_tensor(double{kShards}));
    float_order_mattered = float_order_mattered || bits_of({fsum}) != bits_of({plain});
    // Within float rounding of the float sum: a few units in the last place of the terms'
    // magnitudes (the float sum's own error; the exact one is off by far less).
    const auto g = got.to_vector<float>(), f = fsum.to_vector<float>();
    for (size_t i = 0; i < g.size(); ++i) {
      double magnitude = 0;
      for (const auto& v : values) magnitude += std::fabs(v[i]);
      ASSERT_NEAR(g[i], f[i], 4e-7 * magnitude / kShards + 1e-30) << i;
    }
  }
  set_num_threads(before);
  EXPECT_TRUE(float_order_mattered) << "the float sums never depended on the order: the test shows nothing";
  // On another device (a rank's or a DataParallel replica's), the same bits.
  std::vector<Tensor> moved;
  for (const Tensor& s : shards) moved.push_back(native::to(s, Device::cpu(3)));
  EXPECT_TRUE(bits_of({parallel::detail::exact_sum(moved, kShards, kShards, Device::cpu(3))}) == bits_of({ref}));
}

}  // namespace
}  // namespace ember
