// AdamW (Loshchilov & Hutter): Adam with decoupled weight decay (p *= 1 - lr * weight_decay
// before the Adam step), torch.optim.AdamW's update op for op; default weight_decay 1e-2.
// State keys as Adam's. Not thread-safe.
#pragma once
#include "nn/optim/adam.h"

namespace ember::optim {

class AdamWOptions : public AdamOptions {
 public:
  AdamWOptions(double lr = 1e-3) : AdamOptions(lr) { weight_decay(1e-2); }  // NOLINT: implicit
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<AdamWOptions>(*this); }
  // Chaining setters return AdamOptions&; these keep AdamWOptions in expressions like
  // AdamW(params, AdamWOptions(1e-3).weight_decay(0.1)).
  AdamWOptions& lr(const double& v) { AdamOptions::lr(v); return *this; }
  AdamWOptions& betas(const Betas& v) { AdamOptions::betas(v); return *this; }
  AdamWOptions& eps(const double& v) { AdamOptions::eps(v); return *this; }
  AdamWOptions& weight_decay(const double& v) { AdamOptions::weight_decay(v); return *this; }
  AdamWOptions& amsgrad(const bool& v) { AdamOptions::amsgrad(v); return *this; }
  AdamWOptions& maximize(const bool& v) { AdamOptions::maximize(v); return *this; }
  using AdamOptions::amsgrad;
  using AdamOptions::betas;
  using AdamOptions::eps;
  using AdamOptions::lr;
  using AdamOptions::maximize;
  using AdamOptions::weight_decay;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<ParamGroup> param_groups, const AdamWOptions& defaults = AdamWOptions());
  AdamW(std::vector<Tensor> params, const AdamWOptions& defaults = AdamWOptions())
      : AdamW(std::vector<ParamGroup>{ParamGroup(std::move(params))}, defaults) {}

  const char* type_name() const override { return "AdamW"; }

 protected:
  void update() override;
};

}  // namespace ember::optim
