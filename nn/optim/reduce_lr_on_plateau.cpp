#include "nn/optim/reduce_lr_on_plateau.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ember::optim {

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, const ReduceLROnPlateauOptions& options)
    : optimizer_(optimizer), o_(options) {
  EMBER_CHECK_T(ValueError, o_.factor < 1.0, "Factor should be < 1.0.");
  const size_t n = optimizer_.param_groups().size();
  if (o_.min_lrs.size() == 1) o_.min_lrs.assign(n, o_.min_lrs[0]);
  EMBER_CHECK_T(ValueError, o_.min_lrs.size() == n, "expected ", n, " min_lrs, got ", o_.min_lrs.size());
  best_ = o_.mode_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  for (const auto& g : optimizer_.param_groups()) last_lr_.push_back(g.options().get_lr());
}

bool ReduceLROnPlateau::is_better(double a) const {
  if (!o_.mode_max) return o_.threshold_abs ? a < best_ - o_.threshold : a < best_ * (1.0 - o_.threshold);
  return o_.threshold_abs ? a > best_ + o_.threshold : a > best_ * (o_.threshold + 1.0);
}

void ReduceLROnPlateau::step(double metric) {
  EMBER_CHECK_T(ValueError, !std::isnan(metric), "ReduceLROnPlateau.step: the metric is NaN");
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;  // ignore bad epochs in cooldown
  }
  if (num_bad_epochs_ > o_.patience) {
    auto& groups = optimizer_.param_groups();
    for (size_t i = 0; i < groups.size(); ++i) {
      const double old_lr = groups[i].options().get_lr();
      const double new_lr = std::max(old_lr * o_.factor, o_.min_lrs[i]);
      if (old_lr - new_lr > o_.eps) groups[i].options().set_lr(new_lr);
    }
    cooldown_counter_ = o_.cooldown;
    num_bad_epochs_ = 0;
  }
  last_lr_.clear();
  for (const auto& g : optimizer_.param_groups()) last_lr_.push_back(g.options().get_lr());
}

}  // namespace ember::optim
