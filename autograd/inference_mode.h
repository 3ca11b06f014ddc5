// InferenceMode: RAII guard for code that will never be differentiated (torch.inference_mode /
// c10::InferenceMode). Thread-local, nests, restores the previous state on destruction.
#pragma once
#include "autograd/grad_mode.h"
#include "core/inference_mode.h"

namespace ember {

// Note [Inference tensors]
// While an InferenceMode guard is alive in a thread: grad mode is off (no op records history),
// and every tensor created in that thread is an inference tensor (TensorImpl::inference, set
// where the TensorImpl is made; a view takes its base's flag, so a view made inside of a normal
// tensor stays normal, as in PyTorch). After the guard, an inference tensor may be read by any
// op, but:
//  - an op that records history and would save it for backward throws ("Inference tensors
//    cannot be saved for backward", from SavedVariable in autograd/node.cpp);
//  - an in-place op on it throws (autograd's check_inplace, before anything is written), so
//    an inference tensor's values cannot change behind the back of a graph;
//  - requires_grad_(true) on it throws (core/tensor.cpp).
// clone() outside the guard gives a normal tensor. Unlike PyTorch, inference tensors keep their
// version counter (nothing relies on its absence; PyTorch drops it to save the increments);
// ember::native ops do not check the flag (they are below autograd and never record history).
class InferenceMode {
 public:
  explicit InferenceMode(bool enabled = true)
      : prev_grad_(autograd::GradMode::is_enabled()), prev_inference_(InferenceModeState::is_enabled()) {
    InferenceModeState::set_enabled(enabled);
    if (enabled) autograd::GradMode::set_enabled(false);
  }
  ~InferenceMode() {
    InferenceModeState::set_enabled(prev_inference_);
    autograd::GradMode::set_enabled(prev_grad_);
  }
  InferenceMode(const InferenceMode&) = delete;
  InferenceMode& operator=(const InferenceMode&) = delete;

  /// Whether an enabled guard is alive in this thread.
  static bool is_enabled() { return InferenceModeState::is_enabled(); }

 private:
  bool prev_grad_;
  bool prev_inference_;
};

}  // namespace ember
