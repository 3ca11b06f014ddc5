// Adagrad (Duchi et al.): torch.optim.Adagrad's update (PyTorch 1.13), op for op with native
// ops: sum += g^2, p -= clr * g / (sqrt(sum) + eps) with clr = lr / (1 + (step - 1) * lr_decay),
// L2 weight decay, maximize. State "step" and "sum" (initial_accumulator_value), created for
// every parameter at construction as PyTorch does. Dense gradients only. Not thread-safe.
#pragma once
#include "nn/optim/optimizer.h"

namespace ember::optim {

class AdagradOptions : public OptimizerOptionsBase<AdagradOptions> {
 public:
  AdagradOptions(double lr = 1e-2) : lr_(lr) {}  // NOLINT: implicit, Adagrad(params, 0.01)
  static constexpr const char* kName = "Adagrad";
  EMBER_OPTIM_ARG(double, lr, 1e-2)
  EMBER_OPTIM_ARG(double, lr_decay, 0.0)
  EMBER_OPTIM_ARG(double, weight_decay, 0.0)
  EMBER_OPTIM_ARG(double, initial_accumulator_value, 0.0)
  EMBER_OPTIM_ARG(double, eps, 1e-10)
  EMBER_OPTIM_ARG(bool, maximize, false)

 protected:
  std::vector<OptionField> fields() override;
};

class Adagrad : public OptimizerWith<AdagradOptions> {
 public:
  Adagrad(std::vector<ParamGroup> param_groups, const AdagradOptions& defaults = AdagradOptions());
  Adagrad(std::vector<Tensor> params, const AdagradOptions& defaults = AdagradOptions())
      : Adagrad(std::vector<ParamGroup>{ParamGroup(std::move(params))}, defaults) {}

 protected:
  void update() override;
  void check_param_state(const std::string& where, const Tensor& param, const ParamState& state,
                         const OptimizerOptions& options) const override;
};

}  // namespace ember::optim
