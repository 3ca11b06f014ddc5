#include "nn/optim/one_cycle_lr.h"

#include <cmath>
#include <numbers>

#include "nn/optim/adam.h"
#include "nn/optim/rmsprop.h"
#include "nn/optim/sgd.h"

namespace ember::optim {

namespace {
// Sets the momentum of a group's options (SGD, RMSprop) or beta1 (Adam, AdamW); false when the
// optimizer has no momentum.
bool set_group_momentum(OptimizerOptions& o, double momentum) {
  if (auto* s = dynamic_cast<SGDOptions*>(&o)) {
    s->momentum(momentum);
  } else if (auto* r = dynamic_cast<RMSpropOptions*>(&o)) {
    r->momentum(momentum);
  } else if (auto* a = dynamic_cast<AdamOptions*>(&o)) {
    a->betas({momentum, a->betas().second});
  } else {
    return false;
  }
  return true;
}
}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, const OneCycleLROptions& options)
    : LRScheduler(optimizer), o_(options) {
  if (o_.total_steps > 0) {
    total_steps_ = o_.total_steps;
  } else {
    EMBER_CHECK_T(ValueError, o_.total_steps == 0 && (o_.epochs > 0 || o_.steps_per_epoch > 0),
                  "You must define either total_steps OR (epochs AND steps_per_epoch); total_steps must be a "
                  "positive integer, got ", o_.total_steps);
    EMBER_CHECK_T(ValueError, o_.epochs > 0, "Expected positive integer epochs, but got ", o_.epochs);
    EMBER_CHECK_T(ValueError, o_.steps_per_epoch > 0, "Expected positive integer steps_per_epoch, but got ",
                  o_.steps_per_epoch);
    total_steps_ = o_.epochs * o_.steps_per_epoch;
  }
  EMBER_CHECK_T(ValueError, o_.pct_start >= 0.0 && o_.pct_start <= 1.0,
                "Expected float between 0 and 1 pct_start, but got ", o_.pct_start);
  const size_t n = optimizer.param_groups().size();
  if (max_lrs.size() == 1) max_lrs.assign(n, max_lrs[0]);
  EMBER_CHECK_T(ValueError, max_lrs.size() == n, "expected ", n, " values for max_lr, got ", max_lrs.size());
  const double t = static_cast<double>(total_steps_);
  const double up = o_.pct_start * t - 1.0;
  if (o_.three_phase) {
    phases_ = {{up, 0, 1, true, false}, {2.0 * o_.pct_start * t - 2.0, 1, 0, false, true}, {t - 1.0, 0, 2, true, true}};
  } else {
    phases_ = {{up, 0, 1, true, false}, {t - 1.0, 1, 2, false, true}};
  }
  base_lrs_.clear();
  for (size_t i = 0; i < n; ++i) {
    const double initial = max_lrs[i] / o_.div_factor;
    group_lrs_.push_back({initial, max_lrs[i], initial / o_.final_div_factor});
    base_lrs_.push_back(initial);
    optimizer.param_groups()[i].options().set_lr(initial);
    if (o_.cycle_momentum) {
      EMBER_CHECK_T(ValueError, set_group_momentum(optimizer.param_groups()[i].options(), o_.max_momentum),
                    "optimizer must support momentum with `cycle_momentum` option enabled");
    }
  }
  initial_step();
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (o_.anneal_cos) return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
  return (end - start) * pct + start;
}

std::vector<double> OneCycleLR::get_lr() const {
  const int64_t step = last_epoch_;
  // PyTorch 1.13 lets last_epoch reach total_steps (extrapolating the last phase) and counts one more in the message.
  EMBER_CHECK_T(ValueError, step <= total_steps_, "Tried to step ", step + 1,
                " times. The specified number of total steps is ", total_steps_);
  std::vector<double> lrs;
  for (size_t g = 0; g < group_lrs_.size(); ++g) {
    double start_step = 0.0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& ph = phases_[i];
      if (static_cast<double>(step) <= ph.end_step || i + 1 == phases_.size()) {
        const double pct = (static_cast<double>(step) - start_step) / (ph.end_step - start_step);
        lrs.push_back(anneal(group_lrs_[g][static_cast<size_t>(ph.start_lr)], group_lrs_[g][static_cast<size_t>(ph.end_lr)],
                             pct));
        if (o_.cycle_momentum) {
          const double from = ph.momentum_from_max ? o_.max_momentum : o_.base_momentum;
          const double to = ph.momentum_to_max ? o_.max_momentum : o_.base_momentum;
          set_group_momentum(optimizer_.param_groups()[g].options(), anneal(from, to, pct));
        }
        break;
      }
      start_step = ph.end_step;
    }
  }
  return lrs;
}

}  // namespace ember::optim
