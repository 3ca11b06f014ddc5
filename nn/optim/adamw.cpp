#include "nn/optim/adamw.h"

namespace ember::optim {

AdamW::AdamW(std::vector<ParamGroup> param_groups, const AdamWOptions& defaults)
    : Adam(std::move(param_groups), defaults.clone()) {}

void AdamW::update() { update_groups(true); }

}  // namespace ember::optim
