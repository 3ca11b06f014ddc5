// Adam (Kingma & Ba) with optional AMSGrad and L2 weight decay: torch.optim.Adam's update, op
// for op (state "step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"). AdamW (adamw.h) shares the
// update with decoupled weight decay. Not thread-safe.
#pragma once
#include <utility>

#include "nn/optim/optimizer.h"

namespace ember::optim {

using Betas = std::pair<double, double>;

class AdamOptions : public OptimizerOptionsBase<AdamOptions> {
 public:
  AdamOptions(double lr = 1e-3) : lr_(lr) {}  // NOLINT: implicit, Adam(params, 1e-3)
  static constexpr const char* kName = "Adam";
  EMBER_OPTIM_ARG(double, lr, 1e-3)
  EMBER_OPTIM_ARG(Betas, betas, (Betas{0.9, 0.999}))
  EMBER_OPTIM_ARG(double, eps, 1e-8)
  EMBER_OPTIM_ARG(double, weight_decay, 0.0)
  EMBER_OPTIM_ARG(bool, amsgrad, false)
  EMBER_OPTIM_ARG(bool, maximize, false)

 protected:
  std::vector<OptionField> fields() override;
};

class Adam : public OptimizerWith<AdamOptions> {
 public:
  using OptimizerWith::OptimizerWith;

 protected:
  void update() override;
  /// step, exp_avg and exp_avg_sq (max_exp_avg_sq optional): a 0-dim finite non-negative step,
  /// the others shaped like the parameter; no other key.
  void check_param_state(const std::string& where, const Tensor& param, const ParamState& state,
                         const OptimizerOptions& options) const override;
  /// The update of every parameter with a gradient, one native::adam_update_ per group (one
  /// multi-tensor launch per device for CUDA parameters). decoupled: AdamW's
  /// p *= 1 - lr * weight_decay instead of adding weight_decay * p to the gradient.
  void update_groups(bool decoupled);
};

}  // namespace ember::optim
