// Shared by the GPU tests of the cuDNN RNN (cudnn_rnn_test, cuda_model_test): the switch that
// restores cuDNN's on/off state at scope exit, and the skip for a build or environment without
// the cuDNN path. Header-only; tests only.
#pragma once
#include <gtest/gtest.h>

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/nn_native.h"
#include "tests/support/cuda.h"

/// Skips the test (with its reason) without a GPU, or when the cuDNN RNN is not usable there
/// (ember built without cuDNN, or cuDNN switched off).
#define EMBER_REQUIRE_CUDNN()                                                                           \
  EMBER_REQUIRE_CUDA();                                                                                 \
  if (!::ember::native::cudnn_rnn_usable(::ember::native::CudnnRnnConfig{},                             \
                                         ::ember::zeros({1, 1}, ::ember::TensorOptions().device(        \
                                                                    ::ember::test_support::kGpu))))     \
  GTEST_SKIP() << "ember was built without cuDNN (or EMBER_CUDNN=0): the cuDNN RNN is not available"

namespace ember::test_support {

/// cuDNN's on/off switch (native::cudnn_enabled) as a mode autograd::ModeGuard can hold.
struct CudnnMode {
  static bool is_enabled() { return native::cudnn_enabled(); }
  static void set_enabled(bool on) { native::set_cudnn_enabled(on); }
};
/// Sets cuDNN's on/off switch and restores it at scope exit.
using CudnnSwitch = autograd::ModeGuard<CudnnMode>;

}  // namespace ember::test_support
