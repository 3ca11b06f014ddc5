// Autocast (automatic mixed precision, torch.autocast): a thread-local mode per device type
// under which the ops on the lower-precision list (mm, bmm, matmul, addmm, linear, the RNN
// layers) cast their floating inputs to the autocast dtype (bfloat16 or float16) and return
// results in it, while the ops on the float32 list (softmax, log_softmax, sum, mean, var, norm,
// exp, log, pow, layer_norm and the losses) cast low-precision inputs up to float32. Casts are
// the differentiable to(), so gradients reach float32 parameters in float32.
// See Note [Autocast op lists]. State is per thread; DataParallel carries it into its replica
// threads; the autograd engine's worker threads run backward with autocast off.
#pragma once
#include <optional>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace ember::autograd {

// Note [Autocast op lists]
// ember follows PyTorch's autocast lists for the ops it has:
//  - lower precision (inputs cast to the autocast dtype): mm, bmm, matmul, addmm, linear, and
//    the RNN/LSTM/GRU layers (nn/rnn.cpp: input, states and weights cast; outputs and states
//    returned in the autocast dtype);
//  - float32 (bfloat16/float16 inputs cast up): softmax, log_softmax, sum, mean, var, norm, exp,
//    log, log1p, pow, rsqrt, reciprocal, layer_norm, cross_entropy, nll_loss, mse_loss,
//    binary_cross_entropy_with_logits;
//  - everything else runs in its inputs' dtype, and binary ops promote mixed inputs to the wider
//    type (bfloat16 + float32 -> float32), as without autocast.
// Only tensors on the autocast's device type are cast, and only float32/bfloat16/float16 ones:
// float64 and integer tensors pass through unchanged (PyTorch's is_eligible).
// On CPU, a bfloat16/float16 product is computed by converting to float32, running the float32
// kernel and rounding the result (core/ops/linalg.cpp): the numbers are those of the low dtype at
// every op boundary. The RNN layers compute the recurrence in float32 from rounded inputs and
// weights and round their outputs (as cuDNN's low-precision RNN accumulates in float32).

/// Thread-local autocast state for one device type.
struct AutocastMode {
  static bool is_enabled(DeviceType type);
  /// The dtype ops on the lower-precision list use (CPU: bfloat16, CUDA: float16 by default).
  static DType dtype(DeviceType type);
  static void set_enabled(DeviceType type, bool enabled);
  /// Throws ValueError unless dtype is bfloat16 or float16.
  static void set_dtype(DeviceType type, DType dtype);
};

/// RAII: autocast on (or off, enabled = false) for `device_type` in this thread for its
/// lifetime, with `dtype` (default: bfloat16 on CPU, float16 on CUDA), restoring the previous
/// state at exit, so guards nest as torch.autocast's do. Throws ValueError for another dtype.
class autocast {
 public:
  explicit autocast(DeviceType device_type, std::optional<DType> dtype = std::nullopt, bool enabled = true);
  ~autocast();
  autocast(const autocast&) = delete;
  autocast& operator=(const autocast&) = delete;

 private:
  DeviceType type_;
  bool prev_enabled_;
  DType prev_dtype_;
};

/// For ops on the lower-precision list: `t` cast (differentiably) to the autocast dtype when
/// autocast is on for its device type and t is float32/bfloat16/float16; otherwise `t` itself.
Tensor autocast_to_lower(const Tensor& t);
/// For ops on the float32 list: `t` cast to float32 when autocast is on for its device type and
/// t is bfloat16/float16; otherwise `t` itself.
Tensor autocast_to_float32(const Tensor& t);
/// True when autocast is on for `t`'s device type (t defined).
bool autocast_active_for(const Tensor& t);

}  // namespace ember::autograd

namespace ember {
using autograd::autocast;
}
