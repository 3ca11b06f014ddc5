// Which engine runs an RNN (Note [cuDNN RNN] in core/kernels/cuda/cudnn_rnn.cpp), the parts that hold
// on every machine: EMBER_CUDNN=0 turns cuDNN off (this test runs twice under ctest, with and
// without it), set_cudnn_enabled overrides it, CPU input never takes the cuDNN path, and a CPU
// module records one fused layer node per layer (and counts one layer forward per layer).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "autograd/ops.h"
#include "core/ops/factory.h"
#include "core/ops/nn_native.h"
#include "core/ops/random.h"
#include "nn/rnn.h"
#include "nn/utils/rnn.h"

namespace ember {
namespace {

TEST(RnnBackendSelection, EmberCudnnZeroInTheEnvironmentTurnsCudnnOff) {
  const char* env = std::getenv("EMBER_CUDNN");
  const bool off = env != nullptr && std::strcmp(env, "0") == 0;
  EXPECT_EQ(native::cudnn_enabled(), !off) << "EMBER_CUDNN=" << (env ? env : "(unset)");
}

TEST(RnnBackendSelection, SetCudnnEnabledOverridesTheEnvironment) {
  const bool before = native::cudnn_enabled();
  native::set_cudnn_enabled(!before);
  EXPECT_EQ(native::cudnn_enabled(), !before);
  native::set_cudnn_enabled(before);
  EXPECT_EQ(native::cudnn_enabled(), before);
}

TEST(RnnBackendSelection, CpuInputNeverTakesTheCudnnPath) {
  native::CudnnRnnConfig c;
  c.input_size = 3;
  c.hidden_size = 4;
  EXPECT_FALSE(native::cudnn_rnn_usable(c, zeros({5, 3})));
  EXPECT_FALSE(native::cudnn_rnn_usable(c, zeros({5, 3}, TensorOptions().device(Device::cpu(1)))));
  nn::LSTMImpl lstm(nn::LSTMOptions(3, 4).num_layers(2));
  auto [y, state] = lstm.forward(nn::utils::rnn::pack_sequence({randn({5, 3}), randn({2, 3})}));
  ASSERT_TRUE(y.data.grad_fn() != nullptr);
  EXPECT_EQ(y.data.grad_fn()->name(), "LSTMLayerBackward0");
}

TEST(RnnBackendSelection, TheForwardCountsShowTheBackendWithoutAGraph) {
  // Under NoGradGuard no node names the backend; the counts do: one layer forward per layer on
  // the CPU, and no cuDNN forward.
  nn::GRUImpl gru(nn::GRUOptions(3, 4).num_layers(3).bidirectional(true));
  NoGradGuard no_grad;
  const uint64_t layers = native::rnn_layer_forward_count(), cudnn = native::cudnn_rnn_forward_count();
  auto [y, h] = gru.forward(randn({5, 2, 3}));
  EXPECT_FALSE(y.grad_fn());
  EXPECT_EQ(native::rnn_layer_forward_count(), layers + 3);
  EXPECT_EQ(native::cudnn_rnn_forward_count(), cudnn);
}

}  // namespace
}  // namespace ember
