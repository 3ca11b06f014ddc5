#include "nn/optim/adam.h"

#include <cmath>
#include <type_traits>

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/thread_pool.h"
#include "nn/detail/json.h"

namespace ember::optim {

using nn::detail::JsonObjectWriter;

std::string AdamOptions::to_json() const {
  return JsonObjectWriter()
      .add("lr", lr_)
      .add("betas", std::vector<double>{betas_.first, betas_.second})
      .add("eps", eps_)
      .add("weight_decay", weight_decay_)
      .add("amsgrad", amsgrad_)
      .add("maximize", maximize_)
      .str();
}

void AdamOptions::from_json(const std::string& json) {
  auto v = nn::detail::parse_json(json, "Adam options");
  auto get = [&](const char* k) -> const nn::detail::JsonValue& {
    const auto* e = v.find(k);
    EMBER_CHECK_T(ValueError, e != nullptr, "Adam options: missing key \"", k, "\" in ", json);
    return *e;
  };
  lr_ = get("lr").as_number("Adam lr");
  auto b = get("betas").as_numbers("Adam betas");
  EMBER_CHECK_T(ValueError, b.size() == 2, "Adam options: betas must have 2 values, got ", b.size());
  betas_ = {b[0], b[1]};
  eps_ = get("eps").as_number("Adam eps");
  weight_decay_ = get("weight_decay").as_number("Adam weight_decay");
  amsgrad_ = get("amsgrad").as_bool("Adam amsgrad");
  if (const auto* m = v.find("maximize")) maximize_ = m->as_bool("Adam maximize");
}

void AdamOptions::validate() const {
  EMBER_CHECK_T(ValueError, lr_ >= 0.0, "Invalid learning rate: ", lr_);
  EMBER_CHECK_T(ValueError, eps_ >= 0.0, "Invalid epsilon value: ", eps_);
  EMBER_CHECK_T(ValueError, betas_.first >= 0.0 && betas_.first < 1.0, "Invalid beta parameter at index 0: ",
                betas_.first);
  EMBER_CHECK_T(ValueError, betas_.second >= 0.0 && betas_.second < 1.0, "Invalid beta parameter at index 1: ",
                betas_.second);
  EMBER_CHECK_T(ValueError, weight_decay_ >= 0.0, "Invalid weight_decay value: ", weight_decay_);
}

Adam::Adam(std::vector<ParamGroup> param_groups, const AdamOptions& defaults)
    : Optimizer(std::move(param_groups), defaults.clone()) {}

namespace detail {
namespace {

// Fused update for contiguous CPU tensors of one dtype, in torch's _single_tensor_adam op order,
// each op rounded to T as the separate tensor ops would round it. The branches that would stop
// GCC from vectorizing are template parameters (coupled weight decay, AMSGrad) or exact
// multiplications (maximize: g * -1; no decoupled decay: p * 1).
template <typename T, bool kCoupledDecay, bool kAmsgrad>
void adam_kernel_impl(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, T* __restrict vmax,
                      int64_t n, double lr, double beta1, double beta2, double eps, double weight_decay,
                      bool maximize, bool decoupled, double step) {
  const double bc1 = 1.0 - std::pow(beta1, step);
  const double bc2 = 1.0 - std::pow(beta2, step);
  const T neg_step_size = static_cast<T>(-(lr / bc1));
  const T bc2_sqrt = static_cast<T>(std::sqrt(bc2));
  const T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2);
  const T one_minus_b1 = static_cast<T>(1.0 - beta1), one_minus_b2 = static_cast<T>(1.0 - beta2);
  const T wd = static_cast<T>(weight_decay), e = static_cast<T>(eps);
  const T decay = decoupled && weight_decay != 0.0 ? static_cast<T>(1.0 - lr * weight_decay) : T(1);
  const T sign = maximize ? T(-1) : T(1);
  parallel_for(0, n, 16384, [=](int64_t b, int64_t end) {
    // Local restrict copies: through the closure GCC would reload the pointers every iteration.
    T* __restrict pl = p;
    const T* __restrict gl = g;
    T* __restrict ml = m;
    T* __restrict vl = v;
    T* __restrict vmaxl = vmax;
    for (int64_t i = b; i < end; ++i) {
      T gi = gl[i] * sign;
      T pi = pl[i] * decay;
      if constexpr (kCoupledDecay) gi = gi + wd * pi;
      T mi = ml[i] * b1;
      mi = mi + one_minus_b1 * gi;
      T vi = vl[i] * b2;
      vi = vi + one_minus_b2 * (gi * gi);
      ml[i] = mi;
      vl[i] = vi;
      T den_src = vi;
      if constexpr (kAmsgrad) {
        den_src = vmaxl[i] > vi ? vmaxl[i] : vi;
        vmaxl[i] = den_src;
      }
      T denom = std::sqrt(den_src) / bc2_sqrt + e;
      pl[i] = pi + neg_step_size * (mi / denom);
    }
  });
}

template <typename T>
void adam_kernel(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, double lr, double beta1, double beta2, double eps,
                 double weight_decay, bool maximize, bool decoupled, double step) {
  const bool coupled = !decoupled && weight_decay != 0.0;
  auto run = [&](auto coupled_tag, auto ams_tag) {
    adam_kernel_impl<T, decltype(coupled_tag)::value, decltype(ams_tag)::value>(
        p, g, m, v, vmax, n, lr, beta1, beta2, eps, weight_decay, maximize, decoupled, step);
  };
  using Y = std::true_type;
  using N = std::false_type;
  if (coupled) {
    vmax ? run(Y{}, Y{}) : run(Y{}, N{});
  } else {
    vmax ? run(N{}, Y{}) : run(N{}, N{});
  }
}

bool fusable(const Tensor& p, const Tensor& g, const ParamState& st) {
  if (!(p.device().is_cpu() && g.device().is_cpu() && p.is_contiguous() && g.is_contiguous() &&
        p.dtype() == g.dtype() && (p.dtype() == kFloat32 || p.dtype() == kFloat64) && p.sizes() == g.sizes())) {
    return false;
  }
  for (const auto& [k, t] : st) {
    if (k != "step" && (!t.is_contiguous() || t.dtype() != p.dtype() || !t.device().is_cpu() || t.sizes() != p.sizes())) {
      return false;
    }
  }
  return true;
}

}  // namespace

void adam_update(Tensor& p, const Tensor& grad, ParamState& st, double lr, std::pair<double, double> betas,
                 double eps, double weight_decay, bool amsgrad, bool maximize, bool decoupled) {
  if (!st.count("step")) {
    st["step"] = zeros({}, TensorOptions(kFloat32));
    st["exp_avg"] = zeros_like(p);
    st["exp_avg_sq"] = zeros_like(p);
    if (amsgrad) st["max_exp_avg_sq"] = zeros_like(p);
  }
  if (amsgrad && !st.count("max_exp_avg_sq")) st["max_exp_avg_sq"] = zeros_like(p);
  Tensor& step_t = st["step"];
  native::add_(step_t, 1.0);
  const double step = step_t.item();
  Tensor& m = st["exp_avg"];
  Tensor& v = st["exp_avg_sq"];
  const auto [beta1, beta2] = betas;
  if (fusable(p, grad, st)) {
    auto run = [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      adam_kernel<T>(p.data_ptr<T>(), grad.data_ptr<T>(), m.data_ptr<T>(), v.data_ptr<T>(),
                     amsgrad ? st["max_exp_avg_sq"].data_ptr<T>() : nullptr, p.numel(), lr, beta1, beta2, eps,
                     weight_decay, maximize, decoupled, step);
    };
    if (p.dtype() == kFloat32) {
      run(static_cast<float*>(nullptr));
    } else {
      run(static_cast<double*>(nullptr));
    }
    p.bump_version();
    m.bump_version();
    v.bump_version();
    if (amsgrad) st["max_exp_avg_sq"].bump_version();
    return;
  }
  Tensor g = maximize ? native::neg(grad) : grad;
  if (weight_decay != 0.0) {
    if (decoupled) {
      native::mul_(p, 1.0 - lr * weight_decay);
    } else {
      g = native::add(g, p, weight_decay);
    }
  }
  native::mul_(m, beta1);
  native::add_(m, g, 1.0 - beta1);
  native::mul_(v, beta2);
  native::addcmul_(v, g, g, 1.0 - beta2);
  const double bc1 = 1.0 - std::pow(beta1, step);
  const double bc2 = 1.0 - std::pow(beta2, step);
  const double step_size = lr / bc1;
  const double bc2_sqrt = std::sqrt(bc2);
  Tensor denom;
  if (amsgrad) {
    Tensor& vmax = st["max_exp_avg_sq"];
    native::copy_(vmax, native::maximum(vmax, v));
    denom = native::div(native::sqrt(vmax), bc2_sqrt);
  } else {
    denom = native::div(native::sqrt(v), bc2_sqrt);
  }
  native::add_(denom, eps);
  native::addcdiv_(p, m, denom, -step_size);
}

}  // namespace detail

Tensor Adam::step(const LossClosure& closure) {
  Tensor loss = run_closure(closure);
  NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const AdamOptions&>(group.options());
    for (auto& p : group.params()) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      detail::adam_update(p, g, state_[p.impl()], o.lr(), o.betas(), o.eps(), o.weight_decay(), o.amsgrad(),
                          o.maximize(), false);
    }
  }
  return loss;
}

}  // namespace ember::optim
