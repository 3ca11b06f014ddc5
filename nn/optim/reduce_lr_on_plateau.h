// ReduceLROnPlateau: torch.optim.lr_scheduler.ReduceLROnPlateau of PyTorch 1.13. step(metric)
// once per epoch with the validation metric; after more than `patience` epochs without an
// improvement (relative or absolute threshold), every group's lr is multiplied by factor (not
// below its min_lr; changes smaller than eps are skipped), then `cooldown` epochs pass before
// counting again. Not an LRScheduler (it needs the metric). The optimizer must outlive it. Not
// thread-safe.
#pragma once
#include <string>
#include <vector>

#include "nn/optim/optimizer.h"

namespace ember::optim {

struct ReduceLROnPlateauOptions {
  bool mode_max = false;  // PyTorch's mode='max': a larger metric is better
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  bool threshold_abs = false;  // PyTorch's threshold_mode='abs' (default 'rel')
  int64_t cooldown = 0;
  std::vector<double> min_lrs = {0.0};  // one for all groups, or one per group
  double eps = 1e-8;
};

class ReduceLROnPlateau {
 public:
  /// Throws ValueError for factor >= 1 ("Factor should be < 1.0.") or a min_lrs count that is
  /// neither 1 nor the group count.
  explicit ReduceLROnPlateau(Optimizer& optimizer, const ReduceLROnPlateauOptions& options = {});
  ReduceLROnPlateau(const ReduceLROnPlateau&) = delete;
  ReduceLROnPlateau& operator=(const ReduceLROnPlateau&) = delete;

  /// One epoch's metric (e.g. validation loss). Throws ValueError for NaN.
  void step(double metric);
  /// Every group's lr after the last step().
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  int64_t last_epoch() const { return last_epoch_; }

 private:
  bool is_better(double a) const;

  Optimizer& optimizer_;
  ReduceLROnPlateauOptions o_;
  double best_;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
  int64_t last_epoch_ = 0;
  std::vector<double> last_lr_;
};

}  // namespace ember::optim
