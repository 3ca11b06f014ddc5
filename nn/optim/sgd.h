// SGD with momentum, dampening, Nesterov momentum and L2 weight decay: torch.optim.SGD's
// update, op for op (state "momentum_buffer" per parameter). Not thread-safe.
#pragma once
#include "nn/optim/optimizer.h"

namespace ember::optim {

class SGDOptions : public OptimizerOptionsBase<SGDOptions> {
 public:
  SGDOptions(double lr) : lr_(lr) {}  // NOLINT: implicit, SGD(params, 0.1) as in LibTorch
  static constexpr const char* kName = "SGD";
  EMBER_OPTIM_ARG(double, lr, 0.0)
  EMBER_OPTIM_ARG(double, momentum, 0.0)
  EMBER_OPTIM_ARG(double, dampening, 0.0)
  EMBER_OPTIM_ARG(double, weight_decay, 0.0)
  EMBER_OPTIM_ARG(bool, nesterov, false)
  EMBER_OPTIM_ARG(bool, maximize, false)

 protected:
  std::vector<OptionField> fields() override;
  /// "Nesterov momentum requires a momentum and zero dampening".
  void check() const override;
};

class SGD : public OptimizerWith<SGDOptions> {
 public:
  using OptimizerWith::OptimizerWith;

 protected:
  void update() override;
  /// Only momentum_buffer, shaped like the parameter, when present.
  void check_param_state(const std::string& where, const Tensor& param, const ParamState& state,
                         const OptimizerOptions& options) const override;
};

}  // namespace ember::optim
