// GradScaler: dynamic loss scaling for mixed-precision training (torch.amp.GradScaler). scale()
// multiplies the loss so small float16 gradients do not flush to zero; unscale_() divides the
// gradients of an optimizer's parameters back and looks for inf/NaN; step() runs the optimizer
// only when none was found; update() backs the scale off after an overflow and grows it after
// growth_interval clean steps. With a found_inf_sync (parallel::all_reduce_found_inf for a
// process group), the found-inf flag is combined across ranks, so every rank skips the same
// steps. Not thread-safe: one scaler per training loop, like the optimizer.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "nn/optim/optimizer.h"

namespace ember::optim {

struct GradScalerOptions {
  double init_scale = 65536.0;   // 2^16
  double growth_factor = 2.0;    // > 1
  double backoff_factor = 0.5;   // in (0, 1)
  int64_t growth_interval = 2000;  // clean steps before the scale grows; > 0
  bool enabled = true;           // false: scale() and unscale_() are identities, step() always steps
  /// Combines this process's found-inf flag, a float32 CPU tensor [1] holding 1 when an inf or
  /// NaN was found and 0 otherwise, in place with the other ranks' (max). Null: local only.
  std::function<void(Tensor& found_inf)> found_inf_sync;
};

class GradScaler {
 public:
  /// Throws ValueError for init_scale <= 0, growth_factor <= 1, backoff_factor outside (0, 1)
  /// or growth_interval <= 0.
  explicit GradScaler(GradScalerOptions options = {});

  /// outputs * scale, differentiable (outputs itself when disabled).
  Tensor scale(const Tensor& outputs) const;
  /// Divides the gradients of optimizer's parameters by the scale, in place, and records whether
  /// any is inf or NaN (after found_inf_sync). Throws Error when called twice for one optimizer
  /// before update(), or after step(); ValueError for a float16 gradient (unscale float32
  /// parameters' gradients, as PyTorch requires).
  void unscale_(Optimizer& optimizer);
  /// unscale_() when not yet called, then optimizer.step() unless an inf/NaN was found. Returns
  /// true when the optimizer stepped. Throws Error when called twice before update().
  bool step(Optimizer& optimizer);
  /// Adjusts the scale for the next iteration from this iteration's found-inf flags (backoff
  /// after any overflow, growth after growth_interval clean updates), or sets `new_scale`.
  /// Throws Error when no optimizer was unscaled or stepped since the last update().
  void update(std::optional<double> new_scale = std::nullopt);

  double get_scale() const { return enabled_ ? scale_ : 1.0; }
  /// Consecutive clean updates since the scale last changed.
  int64_t growth_tracker() const { return growth_tracker_; }
  bool is_enabled() const { return enabled_; }
  /// Steps skipped for inf/NaN since construction (not part of the state dict).
  int64_t skipped_steps() const { return skipped_steps_; }

  /// PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker
  /// (empty when disabled).
  std::map<std::string, double> state_dict() const;
  /// Throws ValueError, changing nothing, for a missing key or an invalid value.
  void load_state_dict(const std::map<std::string, double>& state);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct PerOptimizer {
    Stage stage = Stage::kReady;
    bool found_inf = false;
  };

  bool enabled_;
  double scale_;
  double growth_factor_;
  double backoff_factor_;
  int64_t growth_interval_;
  int64_t growth_tracker_ = 0;
  int64_t skipped_steps_ = 0;
  std::function<void(Tensor&)> found_inf_sync_;
  std::map<const Optimizer*, PerOptimizer> per_optimizer_;  // this iteration's, cleared by update()
};

}  // namespace ember::optim
