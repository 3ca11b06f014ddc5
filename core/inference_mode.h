// InferenceModeState: the thread-local switch that core reads when it creates a tensor, so a
// tensor made while it is on is an inference tensor (TensorImpl::inference). The RAII guard
// users hold is ember::InferenceMode (autograd/inference_mode.h), which also turns grad mode
// off; see Note [Inference tensors] there. Thread-local: each thread has its own state.
#pragma once

namespace ember {

struct InferenceModeState {
  static bool is_enabled() noexcept;
  static void set_enabled(bool enabled) noexcept;
};

}  // namespace ember
