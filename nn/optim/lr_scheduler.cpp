#include "nn/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "nn/optim/detail/json_fields.h"

namespace ember::optim {

namespace {
// Python's a % b for b > 0 (never negative).
int64_t py_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return r < 0 ? r + b : r;
}
}  // namespace

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (const auto& g : optimizer_.param_groups()) base_lrs_.push_back(g.options().get_lr());
}

void LRScheduler::initial_step() { step(); }

std::vector<double> LRScheduler::current_lrs() const {
  std::vector<double> out;
  for (const auto& g : optimizer_.param_groups()) out.push_back(g.options().get_lr());
  return out;
}

void LRScheduler::step() {
  ++step_count_;
  ++last_epoch_;
  std::vector<double> lrs = get_lr();
  auto& groups = optimizer_.param_groups();
  EMBER_CHECK_T(ValueError, lrs.size() == groups.size(), "LRScheduler: the optimizer has ", groups.size(),
                " param groups but the scheduler was built for ", lrs.size());
  for (size_t i = 0; i < groups.size(); ++i) groups[i].options().set_lr(lrs[i]);
  last_lr_ = std::move(lrs);
}

std::string LRScheduler::state_json() const {
  return detail::JsonWriter{{"last_epoch", last_epoch_},
                            {"step_count", step_count_},
                            {"base_lrs", base_lrs_},
                            {"last_lr", last_lr_}}
      .dump();
}

void LRScheduler::load_state_json(const std::string& json) {
  const detail::JsonFields f(json, "LRScheduler", "state", /*quote_text=*/false);
  int64_t last_epoch = f.integer("last_epoch");
  int64_t step_count = f.integer("step_count");
  auto base = f.numbers("base_lrs");
  auto last = f.numbers("last_lr");
  EMBER_CHECK_T(ValueError, base.size() == base_lrs_.size() && last.size() == base_lrs_.size(),
                "LRScheduler state: saved for ", base.size(), " param groups, this scheduler has ", base_lrs_.size());
  last_epoch_ = last_epoch;
  step_count_ = step_count;
  base_lrs_ = std::move(base);
  last_lr_ = std::move(last);
}

// ---- StepLR ---------------------------------------------------------------------------------

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  EMBER_CHECK_T(ValueError, step_size >= 1, "StepLR: step_size must be a positive integer, got ", step_size);
  initial_step();
}

std::vector<double> StepLR::get_lr() const {
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0 || last_epoch_ % step_size_ != 0) return lrs;
  for (double& lr : lrs) lr *= gamma_;
  return lrs;
}

std::vector<double> StepLR::closed_form_lr() const {
  std::vector<double> out;
  for (double b : base_lrs_) out.push_back(b * std::pow(gamma_, static_cast<double>(last_epoch_ / step_size_)));
  return out;
}

// ---- MultiStepLR ----------------------------------------------------------------------------

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

std::vector<double> MultiStepLR::get_lr() const {
  // PyTorch's chainable form: at a milestone listed k times, multiply the current lr by gamma^k.
  const auto k = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  std::vector<double> lrs = current_lrs();
  if (k == 0) return lrs;
  for (double& lr : lrs) lr *= std::pow(gamma_, static_cast<double>(k));
  return lrs;
}

std::vector<double> MultiStepLR::closed_form_lr() const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin();
  std::vector<double> out;
  for (double b : base_lrs_) out.push_back(b * std::pow(gamma_, static_cast<double>(passed)));
  return out;
}

// ---- ExponentialLR --------------------------------------------------------------------------

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma) : LRScheduler(optimizer), gamma_(gamma) {
  initial_step();
}

std::vector<double> ExponentialLR::get_lr() const {
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0) return lrs;
  for (double& lr : lrs) lr *= gamma_;
  return lrs;
}

std::vector<double> ExponentialLR::closed_form_lr() const {
  std::vector<double> out;
  for (double b : base_lrs_) out.push_back(b * std::pow(gamma_, static_cast<double>(last_epoch_)));
  return out;
}

// ---- CosineAnnealingLR ----------------------------------------------------------------------------

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  EMBER_CHECK_T(ValueError, T_max >= 1, "CosineAnnealingLR: T_max must be a positive integer, got ", T_max);
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() const {
  constexpr double pi = std::numbers::pi;
  const double T = static_cast<double>(t_max_);
  const double e = static_cast<double>(last_epoch_);
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0) return lrs;
  if (step_count_ == 1 && last_epoch_ > 0) {
    // PyTorch writes this branch as cos(epoch * pi / T_max); keep its rounding.
    for (size_t i = 0; i < lrs.size(); ++i) {
      lrs[i] = eta_min_ + (base_lrs_[i] - eta_min_) * (1.0 + std::cos(e * pi / T)) / 2.0;
    }
    return lrs;
  }
  for (size_t i = 0; i < lrs.size(); ++i) {
    if (py_mod(last_epoch_ - 1 - t_max_, 2 * t_max_) == 0) {
      lrs[i] = lrs[i] + (base_lrs_[i] - eta_min_) * (1.0 - std::cos(pi / T)) / 2.0;
    } else {
      lrs[i] = (1.0 + std::cos(pi * e / T)) / (1.0 + std::cos(pi * (e - 1.0) / T)) * (lrs[i] - eta_min_) + eta_min_;
    }
  }
  return lrs;
}

std::vector<double> CosineAnnealingLR::closed_form_lr() const {
  constexpr double pi = std::numbers::pi;
  std::vector<double> out;
  for (double b : base_lrs_) {
    out.push_back(eta_min_ + (b - eta_min_) *
                                 (1.0 + std::cos(pi * static_cast<double>(last_epoch_) / static_cast<double>(t_max_))) /
                                 2.0);
  }
  return out;
}

// ---- LinearLR ---------------------------------------------------------------------------------

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  EMBER_CHECK_T(ValueError, start_factor > 0.0 && start_factor <= 1.0,
                "Starting multiplicative factor expected to be greater than 0 and less or equal to 1.");
  EMBER_CHECK_T(ValueError, end_factor >= 0.0 && end_factor <= 1.0,
                "Ending multiplicative factor expected to be between 0 and 1.");
  EMBER_CHECK_T(ValueError, total_iters >= 1, "LinearLR: total_iters must be a positive integer, got ", total_iters);
  initial_step();
}

std::vector<double> LinearLR::get_lr() const {
  std::vector<double> lrs = current_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr *= start_factor_;
    return lrs;
  }
  if (last_epoch_ > total_iters_) return lrs;
  const double d = end_factor_ - start_factor_;
  const double f = 1.0 + d / (static_cast<double>(total_iters_) * start_factor_ +
                              static_cast<double>(last_epoch_ - 1) * d);
  for (double& lr : lrs) lr *= f;
  return lrs;
}

std::vector<double> LinearLR::closed_form_lr() const {
  std::vector<double> out;
  const double t = static_cast<double>(std::min(total_iters_, last_epoch_));
  for (double b : base_lrs_) {
    out.push_back(b * (start_factor_ + (end_factor_ - start_factor_) * t / static_cast<double>(total_iters_)));
  }
  return out;
}

// ---- LambdaLR ---------------------------------------------------------------------------------

LambdaLR::LambdaLR(Optimizer& optimizer, Lambda lr_lambda) : LRScheduler(optimizer) {
  EMBER_CHECK_T(ValueError, static_cast<bool>(lr_lambda), "LambdaLR: lr_lambda is empty");
  lambdas_.assign(base_lrs_.size(), lr_lambda);
  initial_step();
}

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas)
    : LRScheduler(optimizer), lambdas_(std::move(lr_lambdas)) {
  EMBER_CHECK_T(ValueError, lambdas_.size() == base_lrs_.size(), "Expected ", base_lrs_.size(), " lr_lambdas, but got ",
                lambdas_.size());
  initial_step();
}

std::vector<double> LambdaLR::get_lr() const {
  std::vector<double> out;
  for (size_t i = 0; i < base_lrs_.size(); ++i) out.push_back(base_lrs_[i] * lambdas_[i](last_epoch_));
  return out;
}

namespace {
int64_t checked_warmup(int64_t steps) {
  EMBER_CHECK_T(ValueError, steps >= 1, "LinearWarmup: warmup_steps must be a positive integer, got ", steps);
  return steps;
}
}  // namespace

LinearWarmup::LinearWarmup(Optimizer& optimizer, int64_t warmup_steps)
    : LambdaLR(optimizer, [w = checked_warmup(warmup_steps)](int64_t e) {
        return std::min(1.0, static_cast<double>(e + 1) / static_cast<double>(w));
      }) {}

}  // namespace ember::optim
