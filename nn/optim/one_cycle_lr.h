// OneCycleLR (Smith & Topin, "super-convergence"): torch.optim.lr_scheduler.OneCycleLR of
// PyTorch 1.13. The lr rises from max_lr / div_factor to max_lr over pct_start of total_steps,
// then falls to initial_lr / final_div_factor (three_phase: back to initial_lr first); cosine or
// linear annealing; with cycle_momentum the momentum (SGD, RMSprop) or beta1 (Adam, AdamW)
// moves inversely between max_momentum and base_momentum. Step it once per batch. The
// optimizer must outlive it. Not thread-safe.
#pragma once
#include <vector>

#include "nn/optim/lr_scheduler.h"

namespace ember::optim {

struct OneCycleLROptions {
  int64_t total_steps = 0;  // or epochs * steps_per_epoch when total_steps is 0
  int64_t epochs = 0;
  int64_t steps_per_epoch = 0;
  double pct_start = 0.3;
  bool anneal_cos = true;  // false: linear annealing (PyTorch's anneal_strategy='linear')
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool three_phase = false;
};

class OneCycleLR : public LRScheduler {
 public:
  /// One max_lr per param group (or one for all). Throws ValueError as PyTorch does: no positive
  /// total_steps (nor epochs and steps_per_epoch), pct_start outside [0, 1], a max_lr count that
  /// is not the group count, cycle_momentum with an optimizer that has no momentum.
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, const OneCycleLROptions& options);
  OneCycleLR(Optimizer& optimizer, double max_lr, const OneCycleLROptions& options)
      : OneCycleLR(optimizer, std::vector<double>{max_lr}, options) {}
  /// The schedule has no other closed form: this is get_lr() at last_epoch.
  std::vector<double> closed_form_lr() const override { return get_lr(); }
  int64_t total_steps() const { return total_steps_; }

 protected:
  /// Throws ValueError once last_epoch passes total_steps ("Tried to step 12 times. The
  /// specified number of total steps is 10", PyTorch's count).
  std::vector<double> get_lr() const override;

 private:
  struct Phase {
    double end_step;
    int start_lr, end_lr;              // 0 initial, 1 max, 2 min
    bool momentum_from_max, momentum_to_max;
  };
  double anneal(double start, double end, double pct) const;

  OneCycleLROptions o_;
  int64_t total_steps_ = 0;
  std::vector<Phase> phases_;
  std::vector<std::vector<double>> group_lrs_;  // per group: initial, max, min
};

}  // namespace ember::optim
