#include "nn/optim/adagrad.h"

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember::optim {

std::vector<OptionField> AdagradOptions::fields() {
  return {non_negative("lr", &lr_), non_negative("lr_decay", &lr_decay_), non_negative("weight_decay", &weight_decay_),
          non_negative("initial_accumulator_value", &initial_accumulator_value_), non_negative("eps", &eps_),
          optional_field("maximize", &maximize_)};
}

namespace {
void init_state(ParamState& st, const Tensor& p, double initial_accumulator_value) {
  st["step"] = zeros({}, TensorOptions(kFloat32));
  st["sum"] = full_like(p, initial_accumulator_value);
}
}  // namespace

Adagrad::Adagrad(std::vector<ParamGroup> param_groups, const AdagradOptions& defaults)
    : OptimizerWith(std::move(param_groups), defaults) {
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdagradOptions&>(group.options());
    for (auto& p : group.params()) init_state(state_[p.impl()], p, o.initial_accumulator_value());
  }
}

void Adagrad::check_param_state(const std::string& where, const Tensor& p, const ParamState& st,
                                const OptimizerOptions&) const {
  check_tensor_state(where, p, st, {"step", "sum"}, {"step", "sum"});
}

void Adagrad::update() {
  for_each_param_with_grad<AdagradOptions>([&](const AdagradOptions& o, Tensor& p, Tensor g, ParamState& st) {
    if (!st.count("step")) init_state(st, p, o.initial_accumulator_value());  // a group added later
    const double step = advance_step(st, p, {});
    if (o.maximize()) g = native::neg(g);
    if (o.weight_decay() != 0.0) g = native::add(g, p, o.weight_decay());
    const double clr = o.lr() / (1.0 + (step - 1.0) * o.lr_decay());
    Tensor& sum = st["sum"];
    native::addcmul_(sum, g, g, 1.0);
    Tensor denom = native::sqrt(sum);
    native::add_(denom, o.eps());
    native::addcdiv_(p, g, denom, -clr);
  });
}

}  // namespace ember::optim
