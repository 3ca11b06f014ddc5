// The FAQ's model on a GPU: Embedding -> pack_padded_sequence -> 2-layer LSTM ->
// pad_packed_sequence(total_length) -> Linear -> cross_entropy, the same batch from the same
// weights on cuda:0 and on cpu:0. The gradients are compared before the optimizer step (Adam's
// lr * g / (|g| + eps) turns rounding differences of near-zero gradients into steps of up to lr),
// then one Adam step where the gradient is well away from zero. Two ways through the LSTM:
//   - the device-neutral layers with dropout 0.3 between the layers (cuDNN off): the masks come
//     from the same Philox stream on both devices, so they are equal;
//   - the cuDNN RNN with dropout 0 (cuDNN draws its own masks: Note [cuDNN RNN] in
//     core/kernels/cuda/cudnn_rnn.cpp, so with dropout its results cannot equal the CPU's).
// Skips without a GPU (and the second without cuDNN).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"
#include "core/ops/random.h"
#include "nn/optim/adam.h"
#include "tests/nn/cudnn_test_util.h"
#include "tests/support/cuda.h"
#include "tests/support/faq_model.h"

namespace ember {
namespace {

constexpr int64_t kVocab = 40, kEmbed = 16, kHidden = 32, kBatch = 6, kSteps = 9;
constexpr double kLr = 1e-2;

using test_support::CudnnSwitch;
using test_support::FaqModel;
using test_support::kGpu;


std::vector<double> host(const Tensor& t) { return native::to(t, Device::cpu()).to_vector<double>(); }

// One batch through the same model on cpu:0 and cuda:0: loss, every gradient, then one Adam step.
// *cudnn_runs: the number of cuDNN RNN forwards the GPU step ran.
void compare_one_step(double dropout, uint64_t* cudnn_runs) {
  manual_seed(11);
  FaqModel cpu_model(kVocab, kEmbed, kHidden, /*num_layers=*/2, dropout, /*padding_idx=*/0);
  FaqModel gpu_model(kVocab, kEmbed, kHidden, /*num_layers=*/2, dropout, /*padding_idx=*/0);
  auto cp = cpu_model.parameters(), gp = gpu_model.parameters();
  EXPECT_EQ(cp.size(), gp.size());
  {
    autograd::NoGradGuard no_grad;
    for (size_t i = 0; i < cp.size(); ++i) native::copy_(gp[i], cp[i]);
  }
  gpu_model.to(kGpu);
  gp = gpu_model.parameters();
  optim::Adam cpu_opt(cp, optim::AdamOptions(kLr));
  optim::Adam gpu_opt(gp, optim::AdamOptions(kLr));

  Tensor lengths = from_vector<int64_t>({9, 3, 7, 1, 9, 5});
  Tensor tokens = randint(1, kVocab, {kBatch, kSteps});
  Tensor targets = test_support::ignore_past_lengths(randint(0, kVocab, {kBatch * kSteps}).to_vector<int64_t>(),
                                                     lengths.to_vector<int64_t>(), kSteps);
  manual_seed(5);  // the CPU and CUDA default generators: the same dropout masks
  cpu_opt.zero_grad(true);
  const double cpu_loss = cpu_model.forward_backward(tokens, lengths, targets).item();
  gpu_opt.zero_grad(true);
  const uint64_t cudnn_before = native::cudnn_rnn_forward_count();
  const double gpu_loss =
      gpu_model.forward_backward(native::to(tokens, kGpu), lengths, native::to(targets, kGpu)).item();
  *cudnn_runs = native::cudnn_rnn_forward_count() - cudnn_before;
  EXPECT_NEAR(gpu_loss, cpu_loss, 1e-5 * (1 + std::fabs(cpu_loss)));

  std::vector<std::vector<double>> cpu_grads, gpu_grads, cpu_before;
  for (size_t i = 0; i < cp.size(); ++i) {
    EXPECT_EQ(gp[i].device(), kGpu) << "parameter " << i;
    if (!cp[i].grad().defined()) {  // the embedding's padding row aside, every parameter gets one
      ADD_FAILURE() << "parameter " << i << " has no gradient on cpu:0";
      return;
    }
    ASSERT_TRUE(gp[i].grad().defined()) << "parameter " << i << " has no gradient on cuda:0";
    cpu_grads.push_back(host(cp[i].grad()));
    gpu_grads.push_back(host(gp[i].grad()));
    cpu_before.push_back(host(cp[i]));
    const auto& c = cpu_grads.back();
    const auto& g = gpu_grads.back();
    for (size_t k = 0; k < c.size(); ++k) {
      ASSERT_NEAR(g[k], c[k], 2e-6 + 1e-4 * std::fabs(c[k])) << "gradient of parameter " << i << " element " << k;
    }
  }

  // Adam's first step is lr * g / (|g| + eps) per element (bias-corrected): where |g| is well
  // above the gradients' rounding differences both devices move by the same amount.
  cpu_opt.step();
  gpu_opt.step();
  size_t compared = 0, total = 0;
  for (size_t i = 0; i < cp.size(); ++i) {
    const auto c = host(cp[i]), g = host(gp[i]);
    ASSERT_EQ(gp[i].device(), kGpu);
    for (size_t k = 0; k < c.size(); ++k) {
      ++total;
      ASSERT_TRUE(std::isfinite(g[k])) << "parameter " << i << " element " << k;
      ASSERT_LE(std::fabs(g[k] - cpu_before[i][k]), kLr * 1.01) << "an Adam step is at most lr";
      if (std::fabs(cpu_grads[i][k]) < 1e-4) continue;
      ++compared;
      ASSERT_NEAR(g[k], c[k], 1e-5) << "parameter " << i << " element " << k << " after one Adam step";
    }
  }
  EXPECT_GT(compared, total / 4) << "too few elements with a gradient away from zero to compare the Adam step";
}

TEST(CudaModel, FaqModelWithDropoutMatchesCpuOnTheFallbackLayers) {
  EMBER_REQUIRE_CUDA();
  CudnnSwitch off(false);  // equal dropout masks need ember's own layers
  uint64_t cudnn_runs = 0;
  compare_one_step(/*dropout=*/0.3, &cudnn_runs);
  EXPECT_EQ(cudnn_runs, 0u) << "cuDNN ran although it was switched off";
}

TEST(CudaModel, FaqModelThroughCudnnMatchesCpuWithoutDropout) {
  CudnnSwitch on(true);
  EMBER_REQUIRE_CUDNN();
  uint64_t cudnn_runs = 0;
  compare_one_step(/*dropout=*/0.0, &cudnn_runs);
  EXPECT_EQ(cudnn_runs, 1u) << "the LSTM's two layers should run as one cuDNN call";
}

}  // namespace
}  // namespace ember
