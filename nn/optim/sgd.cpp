#include "nn/optim/sgd.h"

#include <vector>

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"
#include "nn/optim/detail/json_fields.h"

namespace ember::optim {

using detail::JsonWriter;

std::string SGDOptions::to_json() const {
  return JsonWriter{{"lr", lr_},
                    {"momentum", momentum_},
                    {"dampening", dampening_},
                    {"weight_decay", weight_decay_},
                    {"nesterov", nesterov_},
                    {"maximize", maximize_}}
      .dump();
}

void SGDOptions::from_json(const std::string& json) {
  const detail::JsonFields f(json, "SGD", "options");
  lr_ = f.number("lr");
  momentum_ = f.number("momentum");
  dampening_ = f.number("dampening");
  weight_decay_ = f.number("weight_decay");
  nesterov_ = f.boolean("nesterov");
  if (f.has("maximize")) maximize_ = f.boolean("maximize");
}

void SGDOptions::validate() const {
  EMBER_CHECK_T(ValueError, lr_ >= 0.0, "Invalid learning rate: ", lr_);
  EMBER_CHECK_T(ValueError, momentum_ >= 0.0, "Invalid momentum value: ", momentum_);
  EMBER_CHECK_T(ValueError, weight_decay_ >= 0.0, "Invalid weight_decay value: ", weight_decay_);
  EMBER_CHECK_T(ValueError, !nesterov_ || (momentum_ > 0.0 && dampening_ == 0.0),
                "Nesterov momentum requires a momentum and zero dampening");
}

SGD::SGD(std::vector<ParamGroup> param_groups, const SGDOptions& defaults)
    : Optimizer(std::move(param_groups), defaults.clone()) {}

void SGD::check_param_state(const std::string& where, const Tensor& p, const ParamState& st,
                            const OptimizerOptions&) const {
  for (const auto& [key, t] : st) {
    EMBER_CHECK_T(ValueError, key == "momentum_buffer", "loaded state dict: SGD state of ", where,
                  " has an unknown key \"", key, "\" (expected momentum_buffer)");
    EMBER_CHECK_T(ValueError, t.sizes() == p.sizes() && t.dtype() == p.dtype() && t.device() == p.device(),
                  "loaded state dict: \"momentum_buffer\" of ", where, " must be ", p.dtype(),
                  " of the parameter's shape ", p.sizes(), ", got ", t.dtype(), " of shape ", t.sizes());
  }
}

Tensor SGD::step(const LossClosure& closure) {
  Tensor loss = run_closure(closure);
  NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const SGDOptions&>(group.options());
    const bool use_buf = o.momentum() != 0.0;
    std::vector<Tensor> params, grads, bufs;
    std::vector<bool> init_bufs;
    for (auto& p : group.params()) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      params.push_back(p);
      grads.push_back(g);
      if (!use_buf) continue;
      ParamState& st = state_[p.impl()];
      const bool init = !st.count("momentum_buffer");
      if (init) st["momentum_buffer"] = empty_like(p);
      bufs.push_back(st["momentum_buffer"]);
      init_bufs.push_back(init);
    }
    kernels::SgdArgs a;
    a.lr = o.lr();
    a.momentum = o.momentum();
    a.dampening = o.dampening();
    a.weight_decay = o.weight_decay();
    a.nesterov = o.nesterov();
    a.maximize = o.maximize();
    native::sgd_update_(params, grads, bufs, init_bufs, a);
  }
  return loss;
}

}  // namespace ember::optim
