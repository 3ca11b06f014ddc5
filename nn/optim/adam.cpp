#include "nn/optim/adam.h"

#include <cmath>
#include <tuple>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::optim {

std::vector<OptionField> AdamOptions::fields() {
  return {non_negative("lr", &lr_), {"betas", &betas_}, non_negative("eps", &eps_),
          non_negative("weight_decay", &weight_decay_), {"amsgrad", &amsgrad_}, optional_field("maximize", &maximize_)};
}

void Adam::check_param_state(const std::string& where, const Tensor& p, const ParamState& st,
                             const OptimizerOptions&) const {
  check_tensor_state(where, p, st, {"step", "exp_avg", "exp_avg_sq"}, {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"});
}

void Adam::update_groups(bool decoupled) {
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdamOptions&>(group.options());
    std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs;
    std::vector<double> steps;
    for (auto& p : group.params()) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      ParamState& st = state_[p.impl()];
      steps.push_back(advance_step(st, p, {"exp_avg", "exp_avg_sq"}));
      if (o.amsgrad() && !st.count("max_exp_avg_sq")) st["max_exp_avg_sq"] = zeros_like(p);
      params.push_back(p);
      grads.push_back(g);
      exp_avgs.push_back(st["exp_avg"]);
      exp_avg_sqs.push_back(st["exp_avg_sq"]);
      if (o.amsgrad()) max_exp_avg_sqs.push_back(st["max_exp_avg_sq"]);
    }
    kernels::AdamArgs a;
    a.lr = o.lr();
    std::tie(a.beta1, a.beta2) = o.betas();
    a.eps = o.eps();
    a.weight_decay = o.weight_decay();
    a.maximize = o.maximize();
    a.decoupled = decoupled;
    native::adam_update_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, a);
  }
}

void Adam::update() { update_groups(false); }

}  // namespace ember::optim
