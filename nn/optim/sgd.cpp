#include "nn/optim/sgd.h"

#include <vector>

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::optim {

std::vector<OptionField> SGDOptions::fields() {
  return {non_negative("lr", &lr_), non_negative("momentum", &momentum_), {"dampening", &dampening_},
          non_negative("weight_decay", &weight_decay_), {"nesterov", &nesterov_},
          optional_field("maximize", &maximize_)};
}

void SGDOptions::check() const {
  EMBER_CHECK_T(ValueError, !nesterov_ || (momentum_ > 0.0 && dampening_ == 0.0),
                "Nesterov momentum requires a momentum and zero dampening");
}

void SGD::check_param_state(const std::string& where, const Tensor& p, const ParamState& st,
                            const OptimizerOptions&) const {
  check_tensor_state(where, p, st, {}, {"momentum_buffer"});
}

void SGD::update() {
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
}

}  // namespace ember::optim
