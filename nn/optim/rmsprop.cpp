#include "nn/optim/rmsprop.h"

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember::optim {

std::vector<OptionField> RMSpropOptions::fields() {
  return {non_negative("lr", &lr_), non_negative("alpha", &alpha_), non_negative("eps", &eps_),
          non_negative("weight_decay", &weight_decay_), non_negative("momentum", &momentum_), {"centered", &centered_},
          optional_field("maximize", &maximize_)};
}

void RMSprop::check_param_state(const std::string& where, const Tensor& p, const ParamState& st,
                                const OptimizerOptions& options) const {
  const auto& o = static_cast<const RMSpropOptions&>(options);
  std::vector<std::string> required{"step", "square_avg"};
  if (o.momentum() > 0.0) required.push_back("momentum_buffer");
  if (o.centered()) required.push_back("grad_avg");
  check_tensor_state(where, p, st, required, {"step", "square_avg", "momentum_buffer", "grad_avg"});
}

void RMSprop::update() {
  for_each_param_with_grad<RMSpropOptions>([&](const RMSpropOptions& o, Tensor& p, Tensor g, ParamState& st) {
    advance_step(st, p, {"square_avg"});
    if (o.momentum() > 0.0 && !st.count("momentum_buffer")) st["momentum_buffer"] = zeros_like(p);
    if (o.centered() && !st.count("grad_avg")) st["grad_avg"] = zeros_like(p);
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
  });
}

}  // namespace ember::optim
