// The FAQ's model on a GPU: Embedding -> pack_padded_sequence -> 2-layer LSTM with dropout ->
// pad_packed_sequence(total_length) -> Linear -> cross_entropy -> Adam, one training step on
// cuda:0 compared with the same step on cpu:0 (same weights, same seeds: the dropout masks come
// from the same Philox stream on both devices). Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "nn/optim/adam.h"
#include "tests/support/cuda.h"
#include "tests/support/faq_model.h"

namespace ember {
namespace {

constexpr int64_t kVocab = 40, kEmbed = 16, kHidden = 32, kBatch = 6, kSteps = 9;

using test_support::FaqModel;

TEST(CudaModel, FaqModelOneTrainingStepOnCudaMatchesCpu) {
  EMBER_REQUIRE_CUDA();
  manual_seed(11);
  FaqModel cpu_model(kVocab, kEmbed, kHidden, /*num_layers=*/2, /*dropout=*/0.3, /*padding_idx=*/0);
  FaqModel gpu_model(kVocab, kEmbed, kHidden, /*num_layers=*/2, /*dropout=*/0.3, /*padding_idx=*/0);
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
  Tensor targets = test_support::ignore_past_lengths(randint(0, kVocab, {kBatch * kSteps}).to_vector<int64_t>(),
                                                     lengths.to_vector<int64_t>(), kSteps);

  manual_seed(5);  // the CPU and CUDA default generators: the same dropout masks
  const double cpu_loss = cpu_model.step(tokens, lengths, targets, cpu_opt).item();
  const Device gpu = Device::cuda(0);
  const double gpu_loss = gpu_model.step(to(tokens, gpu), lengths, to(targets, gpu), gpu_opt).item();
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
