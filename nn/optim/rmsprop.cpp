#include "nn/optim/rmsprop.h"

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "nn/optim/detail/json_fields.h"

namespace ember::optim {

using detail::JsonWriter;

std::string RMSpropOptions::to_json() const {
  return JsonWriter{{"lr", lr_},
                    {"alpha", alpha_},
                    {"eps", eps_},
                    {"weight_decay", weight_decay_},
                    {"momentum", momentum_},
                    {"centered", centered_},
                    {"maximize", maximize_}}
      .dump();
}

void RMSpropOptions::from_json(const std::string& json) {
  const detail::JsonFields f(json, "RMSprop", "options");
  lr_ = f.number("lr");
  alpha_ = f.number("alpha");
  eps_ = f.number("eps");
  weight_decay_ = f.number("weight_decay");
  momentum_ = f.number("momentum");
  centered_ = f.boolean("centered");
  if (f.has("maximize")) maximize_ = f.boolean("maximize");
}

void RMSpropOptions::validate() const {
  EMBER_CHECK_T(ValueError, lr_ >= 0.0, "Invalid learning rate: ", lr_);
  EMBER_CHECK_T(ValueError, eps_ >= 0.0, "Invalid epsilon value: ", eps_);
  EMBER_CHECK_T(ValueError, momentum_ >= 0.0, "Invalid momentum value: ", momentum_);
  EMBER_CHECK_T(ValueError, weight_decay_ >= 0.0, "Invalid weight_decay value: ", weight_decay_);
  EMBER_CHECK_T(ValueError, alpha_ >= 0.0, "Invalid alpha value: ", alpha_);
}

RMSprop::RMSprop(std::vector<ParamGroup> param_groups, const RMSpropOptions& defaults)
    : Optimizer(std::move(param_groups), defaults.clone()) {}

void RMSprop::check_param_state(const std::string& where, const Tensor& p, const ParamState& st,
                                const OptimizerOptions& options) const {
  const auto& o = static_cast<const RMSpropOptions&>(options);
  std::vector<std::string> required{"step", "square_avg"};
  if (o.momentum() > 0.0) required.push_back("momentum_buffer");
  if (o.centered()) required.push_back("grad_avg");
  check_tensor_state(where, p, st, required, {"step", "square_avg", "momentum_buffer", "grad_avg"});
}

Tensor RMSprop::step(const LossClosure& closure) {
  Tensor loss = run_closure(closure);
  NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const RMSpropOptions&>(group.options());
    for (auto& p : group.params()) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      ParamState& st = state_[p.impl()];
      if (!st.count("step")) {
        st["step"] = zeros({}, TensorOptions(kFloat32));
        st["square_avg"] = zeros_like(p);
      }
      if (o.momentum() > 0.0 && !st.count("momentum_buffer")) st["momentum_buffer"] = zeros_like(p);
      if (o.centered() && !st.count("grad_avg")) st["grad_avg"] = zeros_like(p);
      native::add_(st["step"], 1.0);
      if (o.maximize()) g = native::neg(g);
      if (o.weight_decay() != 0.0) g = native::add(g, p, o.weight_decay());
      Tensor& square_avg = st["square_avg"];
      native::mul_(square_avg, o.alpha());
      native::addcmul_(square_avg, g, g, 1.0 - o.alpha());
      Tensor avg;
      if (o.centered()) {
        Tensor& grad_avg = st["grad_avg"];
        native::mul_(grad_avg, o.alpha());
        native::add_(grad_avg, g, 1.0 - o.alpha());
        avg = native::clone(square_avg);
        native::addcmul_(avg, grad_avg, grad_avg, -1.0);
        native::sqrt_(avg);
      } else {
        avg = native::sqrt(square_avg);
      }
      native::add_(avg, o.eps());
      if (o.momentum() > 0.0) {
        Tensor& buf = st["momentum_buffer"];
        native::mul_(buf, o.momentum());
        native::addcdiv_(buf, g, avg);
        native::add_(p, buf, -o.lr());
      } else {
        native::addcdiv_(p, g, avg, -o.lr());
      }
    }
  }
  return loss;
}

}  // namespace ember::optim
