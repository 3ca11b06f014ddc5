// RMSprop (Hinton): torch.optim.RMSprop's update (PyTorch 1.13), op for op with native ops:
// square_avg = alpha * square_avg + (1 - alpha) * g^2, optional centering by the running mean
// of g, optional momentum, L2 weight decay, maximize. State "step", "square_avg",
// "momentum_buffer" (momentum > 0), "grad_avg" (centered). Not thread-safe.
#pragma once
#include "nn/optim/optimizer.h"

namespace ember::optim {

class RMSpropOptions : public OptimizerOptionsBase<RMSpropOptions> {
 public:
  RMSpropOptions(double lr = 1e-2) : lr_(lr) {}  // NOLINT: implicit, RMSprop(params, 0.01)
  static constexpr const char* kName = "RMSprop";
  EMBER_OPTIM_ARG(double, lr, 1e-2)
  EMBER_OPTIM_ARG(double, alpha, 0.99)
  EMBER_OPTIM_ARG(double, eps, 1e-8)
  EMBER_OPTIM_ARG(double, weight_decay, 0.0)
  EMBER_OPTIM_ARG(double, momentum, 0.0)
  EMBER_OPTIM_ARG(bool, centered, false)
  EMBER_OPTIM_ARG(bool, maximize, false)

 protected:
  std::vector<OptionField> fields() override;
};

class RMSprop : public OptimizerWith<RMSpropOptions> {
 public:
  using OptimizerWith::OptimizerWith;

 protected:
  void update() override;
  void check_param_state(const std::string& where, const Tensor& param, const ParamState& state,
                         const OptimizerOptions& options) const override;
};

}  // namespace ember::optim
