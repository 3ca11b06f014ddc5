// What the DataParallel tests share (data_parallel_test on CPU devices, data_parallel_multi_gpu_test
// on cuda:0,cuda:1): the FAQ's pack -> LSTM -> unpack module, its batches, tolerances and
// comparisons. Header-only.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/generator.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/rnn.h"
#include "nn/utils/rnn.h"

namespace ember::parallel::faq_test {

constexpr double kTol = 1e-5;

inline std::vector<double> values(const Tensor& t) { return native::to(t, Device::cpu(0), kFloat64).to_vector<double>(); }

inline void expect_near(const Tensor& actual, const Tensor& expected, double tol = kTol, const std::string& what = "") {
  ASSERT_TRUE(actual.defined()) << what;
  ASSERT_TRUE(expected.defined()) << what;
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  auto a = values(actual), e = values(expected);
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - e[i]));
  EXPECT_LE(worst, tol) << what << ": max abs difference " << worst;
}

inline Tensor seeded_randn(const IntList& sizes, uint64_t seed, Device device = Device::cpu(0)) {
  Generator gen(seed);
  return native::to(randn(sizes, TensorOptions(), &gen), device);
}

/// The FAQ's module: pack_padded_sequence -> 2-layer LSTM -> pad_packed_sequence -> Linear.
/// With use_total_length, every replica pads to the input's length (the FAQ's fix).
class PackedLstm : public nn::Cloneable<PackedLstm> {
 public:
  PackedLstm(bool batch_first, bool use_total_length)
      : nn::Cloneable<PackedLstm>("PackedLstm"), batch_first_(batch_first), use_total_length_(use_total_length) {
    reset();
  }
  void reset() override {
    lstm = register_module("lstm", std::make_shared<nn::LSTMImpl>(nn::LSTMOptions(3, 5).num_layers(2).batch_first(batch_first_)));
    head = register_module("head", std::make_shared<nn::LinearImpl>(5, 2));
  }
  Tensor forward(const Tensor& padded_input, const Tensor& input_lengths) {
    namespace rnn = nn::utils::rnn;
    int64_t total_length = padded_input.size(batch_first_ ? 1 : 0);
    auto packed = rnn::pack_padded_sequence(padded_input, input_lengths, batch_first_, /*enforce_sorted=*/false);
    auto packed_output = std::get<0>(lstm->forward(packed));
    std::optional<int64_t> pad_to;
    if (use_total_length_) pad_to = total_length;
    Tensor output = rnn::pad_packed_sequence(packed_output, batch_first_, 0.0, pad_to).first;
    return head->forward(output);
  }
  std::shared_ptr<nn::LSTMImpl> lstm;
  std::shared_ptr<nn::LinearImpl> head;

 private:
  bool batch_first_;
  bool use_total_length_;
};

template <class M>
std::vector<Tensor> grads_of(const M& m) {
  std::vector<Tensor> out;
  for (auto& p : m.parameters()) out.push_back(p.grad());
  return out;
}

/// [T, B, 3] (or [B, T, 3]) input and lengths in [1, T] with the longest in the first replica's share.
inline std::pair<Tensor, Tensor> sequence_batch(int64_t batch, int64_t steps, bool batch_first, uint64_t seed) {
  Generator gen(seed);
  Tensor lengths = randint(1, steps + 1, {batch}, TensorOptions(kInt64), &gen);
  auto l = lengths.to_vector<int64_t>();
  l[0] = steps;
  for (size_t i = 1; i < l.size(); ++i) l[i] = std::min<int64_t>(l[i], steps - 1);
  IntList shape = batch_first ? IntList{batch, steps, 3} : IntList{steps, batch, 3};
  return {randn(shape, TensorOptions(), &gen), from_vector<int64_t>(l)};
}

}  // namespace ember::parallel::faq_test
