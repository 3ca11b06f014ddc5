#include "nn/optim/adagrad.h"

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "nn/optim/detail/json_fields.h"

namespace ember::optim {

using detail::JsonWriter;

std::string AdagradOptions::to_json() const {
  return JsonWriter{{"lr", lr_},
                    {"lr_decay", lr_decay_},
                    {"weight_decay", weight_decay_},
                    {"initial_accumulator_value", initial_accumulator_value_},
                    {"eps", eps_},
                    {"maximize", maximize_}}
      .dump();
}

void AdagradOptions::from_json(const std::string& json) {
  const detail::JsonFields f(json, "Adagrad", "options");
  lr_ = f.number("lr");
  lr_decay_ = f.number("lr_decay");
  weight_decay_ = f.number("weight_decay");
  initial_accumulator_value_ = f.number("initial_accumulator_value");
  eps_ = f.number("eps");
  if (f.has("maximize")) maximize_ = f.boolean("maximize");
}

void AdagradOptions::validate() const {
  EMBER_CHECK_T(ValueError, lr_ >= 0.0, "Invalid learning rate: ", lr_);
  EMBER_CHECK_T(ValueError, lr_decay_ >= 0.0, "Invalid lr_decay value: ", lr_decay_);
  EMBER_CHECK_T(ValueError, weight_decay_ >= 0.0, "Invalid weight_decay value: ", weight_decay_);
  EMBER_CHECK_T(ValueError, initial_accumulator_value_ >= 0.0, "Invalid initial_accumulator_value value: ",
                initial_accumulator_value_);
  EMBER_CHECK_T(ValueError, eps_ >= 0.0, "Invalid epsilon value: ", eps_);
}

namespace {
void init_state(ParamState& st, const Tensor& p, double initial_accumulator_value) {
  st["step"] = zeros({}, TensorOptions(kFloat32));
  st["sum"] = full_like(p, initial_accumulator_value);
}
}  // namespace

Adagrad::Adagrad(std::vector<ParamGroup> param_groups, const AdagradOptions& defaults)
    : Optimizer(std::move(param_groups), defaults.clone()) {
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdagradOptions&>(group.options());
    for (auto& p : group.params()) init_state(state_[p.impl()], p, o.initial_accumulator_value());
  }
}

void Adagrad::check_param_state(const std::string& where, const Tensor& p, const ParamState& st,
                                const OptimizerOptions&) const {
  check_tensor_state(where, p, st, {"step", "sum"}, {"step", "sum"});
}

Tensor Adagrad::step(const LossClosure& closure) {
  Tensor loss = run_closure(closure);
  NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdagradOptions&>(group.options());
    for (auto& p : group.params()) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      ParamState& st = state_[p.impl()];
      if (!st.count("step")) init_state(st, p, o.initial_accumulator_value());  // a group added later
      Tensor& step_t = st["step"];
      native::add_(step_t, 1.0);
      const double step = step_t.item();
      if (o.maximize()) g = native::neg(g);
      if (o.weight_decay() != 0.0) g = native::add(g, p, o.weight_decay());
      const double clr = o.lr() / (1.0 + (step - 1.0) * o.lr_decay());
      Tensor& sum = st["sum"];
      native::addcmul_(sum, g, g, 1.0);
      Tensor denom = native::sqrt(sum);
      native::add_(denom, o.eps());
      native::addcdiv_(p, g, denom, -clr);
    }
  }
  return loss;
}

}  // namespace ember::optim
