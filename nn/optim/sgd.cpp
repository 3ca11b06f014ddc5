#include "nn/optim/sgd.h"

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/thread_pool.h"
#include "nn/detail/json.h"

namespace ember::optim {

using nn::detail::JsonObjectWriter;

std::string SGDOptions::to_json() const {
  return JsonObjectWriter()
      .add("lr", lr_)
      .add("momentum", momentum_)
      .add("dampening", dampening_)
      .add("weight_decay", weight_decay_)
      .add("nesterov", nesterov_)
      .add("maximize", maximize_)
      .str();
}

void SGDOptions::from_json(const std::string& json) {
  auto v = nn::detail::parse_json(json, "SGD options");
  auto get = [&](const char* k) -> const nn::detail::JsonValue& {
    const auto* e = v.find(k);
    EMBER_CHECK_T(ValueError, e != nullptr, "SGD options: missing key \"", k, "\" in ", json);
    return *e;
  };
  lr_ = get("lr").as_number("SGD lr");
  momentum_ = get("momentum").as_number("SGD momentum");
  dampening_ = get("dampening").as_number("SGD dampening");
  weight_decay_ = get("weight_decay").as_number("SGD weight_decay");
  nesterov_ = get("nesterov").as_bool("SGD nesterov");
  if (const auto* m = v.find("maximize")) maximize_ = m->as_bool("SGD maximize");
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

namespace {

// One parameter's update, fused for contiguous CPU tensors of one dtype, in the op order of
// the native-op path below (torch's _single_tensor_sgd), each step rounded to T.
template <typename T>
void sgd_kernel(T* p, const T* g, T* buf, bool init_buf, int64_t n, const SGDOptions& o) {
  const T wd = static_cast<T>(o.weight_decay()), mom = static_cast<T>(o.momentum());
  const T one_minus_damp = static_cast<T>(1.0 - o.dampening()), neg_lr = static_cast<T>(-o.lr());
  const bool maximize = o.maximize(), has_wd = o.weight_decay() != 0.0, nesterov = o.nesterov();
  parallel_for(0, n, 32768, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      T d = maximize ? -g[i] : g[i];
      if (has_wd) d = d + wd * p[i];
      if (buf) {
        T bv = init_buf ? d : buf[i] * mom + one_minus_damp * d;
        buf[i] = bv;
        d = nesterov ? d + mom * bv : bv;
      }
      p[i] = p[i] + neg_lr * d;
    }
  });
}

bool fusable(const Tensor& p, const Tensor& g) {
  return p.device().is_cpu() && g.device().is_cpu() && p.is_contiguous() && g.is_contiguous() &&
         p.dtype() == g.dtype() && (p.dtype() == kFloat32 || p.dtype() == kFloat64) && p.sizes() == g.sizes();
}

}  // namespace

Tensor SGD::step(const LossClosure& closure) {
  Tensor loss = run_closure(closure);
  NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const SGDOptions&>(group.options());
    for (auto& p : group.params()) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      ParamState& st = state_[p.impl()];
      const bool use_buf = o.momentum() != 0.0;
      bool init_buf = false;
      if (use_buf && !st.count("momentum_buffer")) {
        st["momentum_buffer"] = empty_like(p);
        init_buf = true;
      }
      if (fusable(p, g) && (!use_buf || fusable(p, st["momentum_buffer"]))) {
        Tensor buf = use_buf ? st["momentum_buffer"] : Tensor();
        if (p.dtype() == kFloat32) {
          sgd_kernel<float>(p.data_ptr<float>(), g.data_ptr<float>(), use_buf ? buf.data_ptr<float>() : nullptr,
                            init_buf, p.numel(), o);
        } else {
          sgd_kernel<double>(p.data_ptr<double>(), g.data_ptr<double>(), use_buf ? buf.data_ptr<double>() : nullptr,
                             init_buf, p.numel(), o);
        }
        p.bump_version();
        if (use_buf) buf.bump_version();
        continue;
      }
      Tensor d = o.maximize() ? native::neg(g) : g;
      if (o.weight_decay() != 0.0) d = native::add(d, p, o.weight_decay());
      if (use_buf) {
        Tensor& buf = st["momentum_buffer"];
        if (init_buf) {
          native::copy_(buf, d);
        } else {
          native::mul_(buf, o.momentum());
          native::add_(buf, d, 1.0 - o.dampening());
        }
        d = o.nesterov() ? native::add(d, buf, o.momentum()) : buf;
      }
      native::add_(p, d, -o.lr());
    }
  }
  return loss;
}

}  // namespace ember::optim
