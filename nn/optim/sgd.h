// SGD with momentum, dampening, Nesterov momentum and L2 weight decay: torch.optim.SGD's
// update, op for op (state "momentum_buffer" per parameter). Not thread-safe.
#pragma once
#include "nn/optim/optimizer.h"

namespace ember::optim {

class SGDOptions : public OptimizerOptions {
 public:
  SGDOptions(double lr) : lr_(lr) {}  // NOLINT: implicit, SGD(params, 0.1) as in LibTorch
  EMBER_OPTIM_ARG(double, lr, 0.0)
  EMBER_OPTIM_ARG(double, momentum, 0.0)
  EMBER_OPTIM_ARG(double, dampening, 0.0)
  EMBER_OPTIM_ARG(double, weight_decay, 0.0)
  EMBER_OPTIM_ARG(bool, nesterov, false)
  EMBER_OPTIM_ARG(bool, maximize, false)

 public:
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<SGDOptions>(*this); }
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  std::string to_json() const override;
  void from_json(const std::string& json) override;
  /// Also: "Nesterov momentum requires a momentum and zero dampening".
  void validate() const override;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> param_groups, const SGDOptions& defaults);
  SGD(std::vector<Tensor> params, const SGDOptions& defaults) : SGD(std::vector<ParamGroup>{ParamGroup(std::move(params))}, defaults) {}

  Tensor step(const LossClosure& closure = nullptr) override;
  const char* type_name() const override { return "SGD"; }

 protected:
  /// Only momentum_buffer, shaped like the parameter, when present.
  void check_param_state(const std::string& where, const Tensor& param, const ParamState& state,
                         const OptimizerOptions& options) const override;
};

}  // namespace ember::optim
