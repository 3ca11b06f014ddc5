// RMSprop (Hinton): torch.optim.RMSprop's update (PyTorch 1.13), op for op with native ops:
// square_avg = alpha * square_avg + (1 - alpha) * g^2, optional centering by the running mean
// of g, optional momentum, L2 weight decay, maximize. State "step", "square_avg",
// "momentum_buffer" (momentum > 0), "grad_avg" (centered). Not thread-safe.
#pragma once
#include "nn/optim/optimizer.h"

namespace ember::optim {

class RMSpropOptions : public OptimizerOptions {
 public:
  RMSpropOptions(double lr = 1e-2) : lr_(lr) {}  // NOLINT: implicit, RMSprop(params, 0.01)
  EMBER_OPTIM_ARG(double, lr, 1e-2)
  EMBER_OPTIM_ARG(double, alpha, 0.99)
  EMBER_OPTIM_ARG(double, eps, 1e-8)
  EMBER_OPTIM_ARG(double, weight_decay, 0.0)
  EMBER_OPTIM_ARG(double, momentum, 0.0)
  EMBER_OPTIM_ARG(bool, centered, false)
  EMBER_OPTIM_ARG(bool, maximize, false)

 public:
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<RMSpropOptions>(*this); }
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  std::string to_json() const override;
  void from_json(const std::string& json) override;
  void validate() const override;
};

class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<ParamGroup> param_groups, const RMSpropOptions& defaults = RMSpropOptions());
  RMSprop(std::vector<Tensor> params, const RMSpropOptions& defaults = RMSpropOptions())
      : RMSprop(std::vector<ParamGroup>{ParamGroup(std::move(params))}, defaults) {}

  Tensor step(const LossClosure& closure = nullptr) override;
  const char* type_name() const override { return "RMSprop"; }

 protected:
  void check_param_state(const std::string& where, const Tensor& param, const ParamState& state,
                         const OptimizerOptions& options) const override;
};

}  // namespace ember::optim
