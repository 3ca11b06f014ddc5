#include "nn/optim/adamw.h"

namespace ember::optim {

AdamW::AdamW(std::vector<ParamGroup> param_groups, const AdamWOptions& defaults)
    : Adam(std::move(param_groups), defaults.clone()) {}

Tensor AdamW::step(const LossClosure& closure) {
  Tensor loss = run_closure(closure);
  update_groups(true);
  return loss;
}

}  // namespace ember::optim
