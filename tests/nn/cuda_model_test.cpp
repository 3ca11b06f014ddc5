// The FAQ's model on a GPU: Embedding -> pack_padded_sequence -> 2-layer LSTM with dropout ->
// pad_packed_sequence(total_length) -> Linear -> cross_entropy -> Adam, one training step on
// cuda:0 compared with the same step on cpu:0 (same weights, same seeds: the dropout masks come
// from the same Philox stream on both devices). Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/optim/adam.h"
#include "nn/rnn.h"
#include "nn/utils/rnn.h"
#include "tests/support/cuda.h"

namespace ember {
namespace {

constexpr int64_t kVocab = 40, kEmbed = 16, kHidden = 32, kBatch = 6, kSteps = 9;

struct FaqModel {
  std::shared_ptr<nn::Embedding> emb = std::make_shared<nn::Embedding>(kVocab, kEmbed, 0);
  std::shared_ptr<nn::LSTM> lstm =
      std::make_shared<nn::LSTM>(nn::LSTMOptions(kEmbed, kHidden).num_layers(2).dropout(0.3).batch_first(true));
  std::shared_ptr<nn::Linear> lin = std::make_shared<nn::Linear>(kHidden, kVocab);

  std::vector<Tensor> parameters() const {
    std::vector<Tensor> out;
    for (auto* m : std::initializer_list<nn::Module*>{emb.get(), lstm.get(), lin.get()}) {
      for (const Tensor& p : m->parameters()) out.push_back(p);
    }
    return out;
  }
  void to(Device d) {
    for (auto* m : std::initializer_list<nn::Module*>{emb.get(), lstm.get(), lin.get()}) m->to(d);
  }

  // One Adam step; returns the loss.
  double step(const Tensor& tokens, const Tensor& lengths, const Tensor& targets, optim::Adam& opt) {
    opt.zero_grad(true);
    Tensor x = emb->forward(tokens);
    auto packed = nn::utils::rnn::pack_padded_sequence(x, lengths, /*batch_first=*/true, /*enforce_sorted=*/false);
    auto [out, state] = lstm->forward(packed);
    auto [y, lens] = nn::utils::rnn::pad_packed_sequence(out, /*batch_first=*/true, 0.0, kSteps);
    Tensor logits = lin->forward(y);
    nn::functional::CrossEntropyOptions ce;
    ce.ignore_index = -100;
    Tensor loss = nn::functional::cross_entropy(reshape(logits, {-1, kVocab}), targets, ce);
    loss.backward();
    opt.step();
    return loss.item();
  }
};

TEST(CudaModel, FaqModelOneTrainingStepOnCudaMatchesCpu) {
  EMBER_REQUIRE_CUDA();
  manual_seed(11);
  FaqModel cpu_model, gpu_model;
  // The same initial weights on both.
  auto cp = cpu_model.parameters(), gp = gpu_model.parameters();
  ASSERT_EQ(cp.size(), gp.size());
  {
    autograd::NoGradGuard no_grad;
    for (size_t i = 0; i < cp.size(); ++i) native::copy_(gp[i], cp[i]);
  }
  gpu_model.to(Device::cuda(0));
  optim::Adam cpu_opt(cpu_model.parameters(), optim::AdamOptions(1e-2));
  optim::Adam gpu_opt(gpu_model.parameters(), optim::AdamOptions(1e-2));

  Tensor lengths = from_vector<int64_t>({9, 3, 7, 1, 9, 5});
  Tensor tokens = randint(1, kVocab, {kBatch, kSteps});
  std::vector<int64_t> tg = randint(0, kVocab, {kBatch * kSteps}).to_vector<int64_t>();
  const auto lv = lengths.to_vector<int64_t>();
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t t = lv[static_cast<size_t>(b)]; t < kSteps; ++t) tg[static_cast<size_t>(b * kSteps + t)] = -100;
  }
  Tensor targets = from_vector<int64_t>(tg);

  manual_seed(5);  // the CPU and CUDA default generators: the same dropout masks
  const double cpu_loss = cpu_model.step(tokens, lengths, targets, cpu_opt);
  const Device gpu = Device::cuda(0);
  const double gpu_loss = gpu_model.step(to(tokens, gpu), lengths, to(targets, gpu), gpu_opt);
  EXPECT_NEAR(gpu_loss, cpu_loss, 1e-5 * (1 + std::fabs(cpu_loss)));
  cp = cpu_model.parameters();
  gp = gpu_model.parameters();
  for (size_t i = 0; i < cp.size(); ++i) {
    const auto c = cp[i].to_vector<double>(), g = gp[i].to_vector<double>();
    ASSERT_EQ(gp[i].device(), gpu);
    for (size_t k = 0; k < c.size(); ++k) ASSERT_NEAR(g[k], c[k], 1e-4) << "parameter " << i << " element " << k;
  }
}

}  // namespace
}  // namespace ember
