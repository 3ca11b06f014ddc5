#include "nn/optim/adam.h"

#include <cmath>
#include <tuple>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"
#include "nn/optim/detail/json_fields.h"

namespace ember::optim {

using detail::JsonWriter;

std::string AdamOptions::to_json() const {
  return JsonWriter{{"lr", lr_},
                    {"betas", std::vector<double>{betas_.first, betas_.second}},
                    {"eps", eps_},
                    {"weight_decay", weight_decay_},
                    {"amsgrad", amsgrad_},
                    {"maximize", maximize_}}
      .dump();
}

void AdamOptions::from_json(const std::string& json) {
  const detail::JsonFields f(json, "Adam", "options");
  lr_ = f.number("lr");
  auto b = f.numbers("betas");
  EMBER_CHECK_T(ValueError, b.size() == 2, "Adam options: betas must have 2 values, got ", b.size());
  betas_ = {b[0], b[1]};
  eps_ = f.number("eps");
  weight_decay_ = f.number("weight_decay");
  amsgrad_ = f.boolean("amsgrad");
  if (f.has("maximize")) maximize_ = f.boolean("maximize");
}

void AdamOptions::validate() const {
  EMBER_CHECK_T(ValueError, lr_ >= 0.0, "Invalid learning rate: ", lr_);
  EMBER_CHECK_T(ValueError, eps_ >= 0.0, "Invalid epsilon value: ", eps_);
  EMBER_CHECK_T(ValueError, betas_.first >= 0.0 && betas_.first < 1.0, "Invalid beta parameter at index 0: ",
                betas_.first);
  EMBER_CHECK_T(ValueError, betas_.second >= 0.0 && betas_.second < 1.0, "Invalid beta parameter at index 1: ",
                betas_.second);
  EMBER_CHECK_T(ValueError, weight_decay_ >= 0.0, "Invalid weight_decay value: ", weight_decay_);
}

Adam::Adam(std::vector<ParamGroup> param_groups, const AdamOptions& defaults)
    : Optimizer(std::move(param_groups), defaults.clone()) {}

void Adam::check_param_state(const std::string& where, const Tensor& p, const ParamState& st,
                             const OptimizerOptions&) const {
  for (const auto& [key, t] : st) {
    EMBER_CHECK_T(ValueError, key == "step" || key == "exp_avg" || key == "exp_avg_sq" || key == "max_exp_avg_sq",
                  "loaded state dict: ", type_name(), " state of ", where, " has an unknown key \"", key,
                  "\" (expected step, exp_avg, exp_avg_sq, max_exp_avg_sq)");
  }
  if (st.empty()) return;  // no state yet: the first step() creates it
  for (const char* key : {"step", "exp_avg", "exp_avg_sq"}) {
    EMBER_CHECK_T(ValueError, st.count(key), "loaded state dict: ", type_name(), " state of ", where,
                  " lacks \"", key, "\" (it has step, exp_avg and exp_avg_sq or nothing)");
  }
  const Tensor& step = st.at("step");
  EMBER_CHECK_T(ValueError, step.dim() == 0, "loaded state dict: \"step\" of ", where,
                " must be a 0-dim tensor, got shape ", step.sizes());
  const double s = step.item();
  EMBER_CHECK_T(ValueError, std::isfinite(s) && s >= 0, "loaded state dict: \"step\" of ", where,
                " must be a finite count >= 0, got ", s);
  for (const auto& [key, t] : st) {
    if (key == "step") continue;
    EMBER_CHECK_T(ValueError, t.sizes() == p.sizes() && t.dtype() == p.dtype() && t.device() == p.device(),
                  "loaded state dict: \"", key, "\" of ", where, " must be ", p.dtype(), " of the parameter's shape ",
                  p.sizes(), ", got ", t.dtype(), " of shape ", t.sizes());
  }
}

void Adam::update_groups(bool decoupled) {
  NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdamOptions&>(group.options());
    std::vector<Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs;
    std::vector<double> steps;
    for (auto& p : group.params()) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      ParamState& st = state_[p.impl()];
      if (!st.count("step")) {
        st["step"] = zeros({}, TensorOptions(kFloat32));
        st["exp_avg"] = zeros_like(p);
        st["exp_avg_sq"] = zeros_like(p);
      }
      if (o.amsgrad() && !st.count("max_exp_avg_sq")) st["max_exp_avg_sq"] = zeros_like(p);
      Tensor& step_t = st["step"];
      native::add_(step_t, 1.0);
      steps.push_back(step_t.item());
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

Tensor Adam::step(const LossClosure& closure) {
  Tensor loss = run_closure(closure);
  update_groups(false);
  return loss;
}

}  // namespace ember::optim
