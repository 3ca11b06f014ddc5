#include "nn/optim/grad_scaler.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember::optim {
namespace {

void check_settings(double scale, double growth, double backoff, int64_t interval) {
  EMBER_CHECK_T(ValueError, std::isfinite(scale) && scale > 0, "GradScaler: the scale must be positive and finite, got ",
                scale);
  EMBER_CHECK_T(ValueError, growth > 1, "GradScaler: growth_factor must be > 1, got ", growth);
  EMBER_CHECK_T(ValueError, backoff > 0 && backoff < 1, "GradScaler: backoff_factor must be in (0, 1), got ", backoff);
  EMBER_CHECK_T(ValueError, interval > 0, "GradScaler: growth_interval must be positive, got ", interval);
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions o)
    : enabled_(o.enabled), scale_(o.init_scale), growth_factor_(o.growth_factor), backoff_factor_(o.backoff_factor),
      growth_interval_(o.growth_interval), found_inf_sync_(std::move(o.found_inf_sync)) {
  check_settings(scale_, growth_factor_, backoff_factor_, growth_interval_);
}

Tensor GradScaler::scale(const Tensor& outputs) const {
  if (!enabled_) return outputs;
  return mul(outputs, scale_);
}

void GradScaler::unscale_(Optimizer& optimizer) {
  if (!enabled_) return;
  PerOptimizer& st = per_optimizer_[&optimizer];
  EMBER_CHECK(st.stage != Stage::kUnscaled,
              "GradScaler: unscale_() has already been called on this optimizer since the last update()");
  EMBER_CHECK(st.stage != Stage::kStepped, "GradScaler: unscale_() is being called after step()");
  NoGradGuard no_grad;
  const double inv_scale = 1.0 / scale_;
  // Each gradient's sum of g * 0 is 0 when g is finite and NaN when it holds an inf or NaN; the
  // per-device partial flags are summed on their device and read once each.
  std::map<Device, Tensor> flags;
  for (ParamGroup& group : optimizer.param_groups()) {
    for (Tensor& p : group.params()) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      EMBER_CHECK_T(ValueError, g.dtype() != kFloat16, "GradScaler: attempting to unscale float16 gradients (of a ",
                    p.sizes(), " parameter); keep parameters in float32 and let autocast cast them");
      native::mul_(g, inv_scale);
      Tensor bad = native::sum(native::mul(g, 0.0), {}, false, kFloat32);
      auto it = flags.find(g.device());
      if (it == flags.end()) {
        flags.emplace(g.device(), bad);
      } else {
        it->second = native::add(it->second, bad);
      }
    }
  }
  bool found = false;
  for (auto& [device, flag] : flags) found = found || !std::isfinite(flag.item());
  Tensor found_inf = full({1}, found ? 1.0 : 0.0, TensorOptions(kFloat32));
  if (found_inf_sync_) {
    found_inf_sync_(found_inf);
    found = found_inf.item() != 0.0;
  }
  st.found_inf = found;
  st.stage = Stage::kUnscaled;
}

bool GradScaler::step(Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return true;
  }
  {
    auto it = per_optimizer_.find(&optimizer);
    EMBER_CHECK(it == per_optimizer_.end() || it->second.stage != Stage::kStepped,
                "GradScaler: step() has already been called since the last update()");
  }
  if (per_optimizer_[&optimizer].stage == Stage::kReady) unscale_(optimizer);
  PerOptimizer& st = per_optimizer_[&optimizer];
  st.stage = Stage::kStepped;
  if (st.found_inf) {
    ++skipped_steps_;
    return false;
  }
  optimizer.step();
  return true;
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!enabled_) return;
  if (new_scale) {
    check_settings(*new_scale, growth_factor_, backoff_factor_, growth_interval_);
    scale_ = *new_scale;
    growth_tracker_ = 0;
    per_optimizer_.clear();
    return;
  }
  EMBER_CHECK(!per_optimizer_.empty(), "GradScaler: no inf checks were recorded prior to update() "
              "(call unscale_() or step() first)");
  bool found = false;
  for (const auto& [opt, st] : per_optimizer_) found = found || st.found_inf;
  if (found) {
    scale_ *= backoff_factor_;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == growth_interval_) {
    const double grown = scale_ * growth_factor_;
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  }
  per_optimizer_.clear();
}

std::map<std::string, double> GradScaler::state_dict() const {
  if (!enabled_) return {};
  return {{"scale", scale_},
          {"growth_factor", growth_factor_},
          {"backoff_factor", backoff_factor_},
          {"growth_interval", static_cast<double>(growth_interval_)},
          {"_growth_tracker", static_cast<double>(growth_tracker_)}};
}

void GradScaler::load_state_dict(const std::map<std::string, double>& state) {
  EMBER_CHECK_T(ValueError, enabled_ || state.empty(),
                "GradScaler: the state dict is not empty, but this scaler is disabled");
  if (!enabled_) return;
  auto get = [&](const char* key) {
    auto it = state.find(key);
    EMBER_CHECK_T(ValueError, it != state.end(), "GradScaler: the state dict has no '", key, "'");
    return it->second;
  };
  const double scale = get("scale"), growth = get("growth_factor"), backoff = get("backoff_factor");
  const double interval = get("growth_interval"), tracker = get("_growth_tracker");
  EMBER_CHECK_T(ValueError, interval == std::floor(interval) && tracker == std::floor(tracker) && tracker >= 0 &&
                                tracker < interval,
                "GradScaler: growth_interval and _growth_tracker must be integers with 0 <= _growth_tracker < "
                "growth_interval, got ", interval, " and ", tracker);
  check_settings(scale, growth, backoff, static_cast<int64_t>(interval));
  scale_ = scale;
  growth_factor_ = growth;
  backoff_factor_ = backoff;
  growth_interval_ = static_cast<int64_t>(interval);
  growth_tracker_ = static_cast<int64_t>(tracker);
}

}  // namespace ember::optim
