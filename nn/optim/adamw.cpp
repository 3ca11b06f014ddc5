#include "nn/optim/adamw.h"

#include "autograd/grad_mode.h"

namespace ember::optim {

AdamW::AdamW(std::vector<ParamGroup> param_groups, const AdamWOptions& defaults)
    : Adam(std::move(param_groups), defaults.clone()) {}

Tensor AdamW::step(const LossClosure& closure) {
  Tensor loss = run_closure(closure);
  NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdamOptions&>(group.options());
    for (auto& p : group.params()) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      detail::adam_update(p, g, state_[p.impl()], o.lr(), o.betas(), o.eps(), o.weight_decay(), o.amsgrad(),
                          o.maximize(), true);
    }
  }
  return loss;
}

}  // namespace ember::optim
