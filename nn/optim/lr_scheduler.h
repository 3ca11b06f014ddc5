// Learning-rate schedulers (torch.optim.lr_scheduler): each sets the lr of every param group of
// an optimizer it references (the optimizer must outlive it). Construction performs the initial
// step (last_epoch becomes 0), as in PyTorch; call step() once per epoch/iteration after
// optimizer.step(). get_lr() uses PyTorch's chainable (recursive) formulas, so sequences match
// PyTorch's to the last bit; closed_form_lr() gives the closed forms. Not thread-safe.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "nn/optim/optimizer.h"

namespace ember::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Advances last_epoch by one and sets every group's lr.
  void step();
  /// The lrs set by the last step(), one per group.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  /// The lr of each group at last_epoch by the closed-form formula.
  virtual std::vector<double> closed_form_lr() const = 0;

  /// {"last_epoch":..,"step_count":..,"base_lrs":[..],"last_lr":[..]} (+ scheduler fields).
  std::string state_json() const;
  /// Restores state_json()'s fields (does not touch the optimizer's lrs). Throws ValueError
  /// when malformed or the group count differs.
  void load_state_json(const std::string& json);

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  /// Call at the end of the derived constructor: the initial step.
  void initial_step();
  /// The chainable formula: lrs for last_epoch_ from the groups' current lrs.
  virtual std::vector<double> get_lr() const = 0;
  std::vector<double> current_lrs() const;

  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
};

/// lr = base_lr * gamma^(epoch / step_size). Throws ValueError for step_size < 1.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  std::vector<double> closed_form_lr() const override;

 protected:
  std::vector<double> get_lr() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// lr = base_lr * gamma^(number of milestones <= epoch); a milestone listed twice counts twice.
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);
  std::vector<double> closed_form_lr() const override;

 protected:
  std::vector<double> get_lr() const override;

 private:
  std::vector<int64_t> milestones_;  // sorted
  double gamma_;
};

/// lr = base_lr * gamma^epoch.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);
  std::vector<double> closed_form_lr() const override;

 protected:
  std::vector<double> get_lr() const override;

 private:
  double gamma_;
};

/// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2. Throws ValueError for T_max < 1.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);
  std::vector<double> closed_form_lr() const override;

 protected:
  std::vector<double> get_lr() const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

/// Linear warmup (or decay): lr = base_lr * (start + (end - start) * min(epoch, total_iters) / total_iters).
/// Throws ValueError unless 0 < start_factor <= 1, 0 <= end_factor <= 1, total_iters >= 1.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3.0, double end_factor = 1.0, int64_t total_iters = 5);
  std::vector<double> closed_form_lr() const override;

 protected:
  std::vector<double> get_lr() const override;

 private:
  double start_factor_;
  double end_factor_;
  int64_t total_iters_;
};

/// lr = base_lr * lambda(epoch); one lambda for all groups or one per group.
class LambdaLR : public LRScheduler {
 public:
  using Lambda = std::function<double(int64_t epoch)>;
  LambdaLR(Optimizer& optimizer, Lambda lr_lambda);
  /// Throws ValueError unless there is one lambda per param group.
  LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas);
  std::vector<double> closed_form_lr() const override { return get_lr(); }

 protected:
  std::vector<double> get_lr() const override;

 private:
  std::vector<Lambda> lambdas_;
};

/// Linear warmup from 0 over `warmup_steps` steps, then constant: a LambdaLR with
/// lambda(e) = min(1, (e + 1) / warmup_steps) (lr reaches base_lr at step warmup_steps - 1).
class LinearWarmup : public LambdaLR {
 public:
  /// Throws ValueError for warmup_steps < 1.
  LinearWarmup(Optimizer& optimizer, int64_t warmup_steps);
};

}  // namespace ember::optim
