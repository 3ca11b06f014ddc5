#include "nn/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <typeinfo>

#include "autograd/grad_mode.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "nn/optim/detail/json_fields.h"

namespace ember::optim {

namespace {
template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

// PyTorch's words for a negative hyper-parameter.
std::string invalid_text(const std::string& key) {
  if (key == "lr") return "Invalid learning rate: ";
  if (key == "eps") return "Invalid epsilon value: ";
  return "Invalid " + key + " value: ";
}
}  // namespace

std::string OptimizerOptions::to_json() const {
  detail::JsonWriter j = detail::JsonWriter::object();
  for (const OptionField& f : const_cast<OptimizerOptions*>(this)->fields()) {
    std::visit(Overloaded{[&](const std::pair<double, double>* v) { j[f.key] = std::vector<double>{v->first, v->second}; },
                          [&](const auto* v) { j[f.key] = *v; }},
               f.value);
  }
  return j.dump();
}

void OptimizerOptions::from_json(const std::string& json) {
  const detail::JsonFields in(json, owner(), "options");
  for (const OptionField& f : fields()) {
    if (f.optional && !in.has(f.key)) continue;
    std::visit(Overloaded{[&](double* v) { *v = in.number(f.key); }, [&](bool* v) { *v = in.boolean(f.key); },
                          [&](std::pair<double, double>* v) {
                            const std::vector<double> b = in.numbers(f.key);
                            EMBER_CHECK_T(ValueError, b.size() == 2, owner(), " options: ", f.key,
                                          " must have 2 values, got ", b.size());
                            *v = {b[0], b[1]};
                          }},
               f.value);
  }
}

void OptimizerOptions::validate() const {
  for (const OptionField& f : const_cast<OptimizerOptions*>(this)->fields()) {
    if (const auto* betas = std::get_if<std::pair<double, double>*>(&f.value)) {
      const double b[2] = {(*betas)->first, (*betas)->second};
      for (int i = 0; i < 2; ++i) {
        EMBER_CHECK_T(ValueError, b[i] >= 0.0 && b[i] < 1.0, "Invalid beta parameter at index ", i, ": ", b[i]);
      }
    } else if (f.non_negative) {
      const double v = *std::get<double*>(f.value);
      EMBER_CHECK_T(ValueError, v >= 0.0, invalid_text(f.key), v);
    }
  }
  check();
}

OptimizerOptions& ParamGroup::options() {
  EMBER_CHECK(options_ != nullptr, "ParamGroup: this group has no options (it is not part of an optimizer yet)");
  return *options_;
}
const OptimizerOptions& ParamGroup::options() const {
  EMBER_CHECK(options_ != nullptr, "ParamGroup: this group has no options (it is not part of an optimizer yet)");
  return *options_;
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults)
    : defaults_(std::move(defaults)) {
  EMBER_INTERNAL_ASSERT(defaults_ != nullptr);
  defaults_->validate();
  EMBER_CHECK_T(ValueError, !groups.empty(), "optimizer got an empty parameter list");
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  EMBER_CHECK_T(ValueError, !group.params().empty(), "optimizer got an empty parameter list");
  std::set<TensorImpl*> mine;
  for (const auto& p : group.params()) {
    EMBER_CHECK_T(ValueError, p.defined(), "optimizer can only optimize defined Tensors");
    EMBER_CHECK_T(ValueError, p.is_leaf(), "can't optimize a non-leaf Tensor");
    EMBER_CHECK_T(ValueError, p.is_floating_point(), "optimizer can only optimize Tensors of floating point dtype, got ",
                  p.dtype());
    EMBER_CHECK_T(ValueError, mine.insert(p.impl()).second,
                  "optimizer contains a parameter group with duplicate parameters");
  }
  for (const auto& g : param_groups_) {
    for (const auto& p : g.params()) {
      EMBER_CHECK_T(ValueError, !mine.count(p.impl()), "some parameters appear in more than one parameter group");
    }
  }
  if (!group.has_options()) {
    group.set_options(defaults_->clone());
  } else {
    const OptimizerOptions& o = group.options();
    // No type_name() here: add_param_group also runs inside the base constructor.
    EMBER_CHECK_T(TypeError, typeid(o) == typeid(*defaults_),
                  "optimizer: a param group's options are of another optimizer's type");
    o.validate();
  }
  param_groups_.push_back(std::move(group));
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& g : param_groups_) {
    for (auto& p : g.params()) {
      AutogradMeta* m = p.autograd_meta();
      if (!m || !m->grad || !m->grad->defined()) continue;
      if (set_to_none) {
        *m->grad = Tensor();
      } else {
        native::zero_(*m->grad);
      }
    }
  }
}

const ParamState* Optimizer::find_state(const Tensor& param) const {
  auto it = state_.find(param.impl());
  return it == state_.end() ? nullptr : &it->second;
}

OptimizerStateDict Optimizer::state_dict() const {
  OptimizerStateDict sd;
  int64_t index = 0;
  for (const auto& g : param_groups_) {
    OptimizerStateDict::Group out;
    out.options = g.options().to_json();
    for (const auto& p : g.params()) {
      auto it = state_.find(p.impl());
      if (it != state_.end() && !it->second.empty()) sd.state[index] = it->second;
      out.params.push_back(index++);
    }
    sd.param_groups.push_back(std::move(out));
  }
  return sd;
}

double Optimizer::advance_step(ParamState& state, const Tensor& param, std::initializer_list<const char*> keys) {
  if (!state.count("step")) {
    state["step"] = zeros({}, TensorOptions(kFloat32));
    for (const char* key : keys) {
      if (!state.count(key)) state[key] = zeros_like(param);
    }
  }
  Tensor& step = state["step"];
  native::add_(step, 1.0);
  return step.item();
}

void Optimizer::check_param_state(const std::string&, const Tensor&, const ParamState&,
                                  const OptimizerOptions&) const {}

void Optimizer::check_tensor_state(const std::string& where, const Tensor& p, const ParamState& st,
                                   const std::vector<std::string>& required,
                                   const std::vector<std::string>& allowed) const {
  auto list = [](const std::vector<std::string>& keys) {
    std::string s;
    for (const auto& k : keys) s += (s.empty() ? "" : ", ") + k;
    return s;
  };
  for (const auto& [key, t] : st) {
    EMBER_CHECK_T(ValueError, std::find(allowed.begin(), allowed.end(), key) != allowed.end(), "loaded state dict: ",
                  type_name(), " state of ", where, " has an unknown key \"", key, "\" (expected ", list(allowed), ")");
  }
  if (st.empty()) return;  // no state yet: the first step() creates it
  for (const auto& key : required) {
    EMBER_CHECK_T(ValueError, st.count(key), "loaded state dict: ", type_name(), " state of ", where, " lacks \"", key,
                  "\" (it has ", list(required), " or nothing)");
  }
  for (const auto& [key, t] : st) {
    if (key == "step") {
      EMBER_CHECK_T(ValueError, t.dim() == 0, "loaded state dict: \"step\" of ", where,
                    " must be a 0-dim tensor, got shape ", t.sizes());
      const double s = t.item();
      EMBER_CHECK_T(ValueError, std::isfinite(s) && s >= 0, "loaded state dict: \"step\" of ", where,
                    " must be a finite count >= 0, got ", s);
      continue;
    }
    EMBER_CHECK_T(ValueError, t.sizes() == p.sizes() && t.dtype() == p.dtype() && t.device() == p.device(),
                  "loaded state dict: \"", key, "\" of ", where, " must be ", p.dtype(), " of the parameter's shape ",
                  p.sizes(), ", got ", t.dtype(), " of shape ", t.sizes());
  }
}

void Optimizer::validate_state_dict(const OptimizerStateDict& sd) const { (void)prepare_load(sd); }

void Optimizer::load_state_dict(const OptimizerStateDict& sd) {
  LoadedState loaded = prepare_load(sd);
  for (size_t gi = 0; gi < param_groups_.size(); ++gi) param_groups_[gi].set_options(std::move(loaded.options[gi]));
  state_ = std::move(loaded.state);
}

Optimizer::LoadedState Optimizer::prepare_load(const OptimizerStateDict& sd) const {
  EMBER_CHECK_T(ValueError, sd.param_groups.size() == param_groups_.size(),
                "loaded state dict has a different number of parameter groups (", sd.param_groups.size(),
                " vs the optimizer's ", param_groups_.size(), ")");
  std::map<int64_t, std::pair<Tensor, size_t>> by_index;  // index -> (parameter, group)
  for (size_t gi = 0; gi < param_groups_.size(); ++gi) {
    const auto& saved = sd.param_groups[gi];
    EMBER_CHECK_T(ValueError, saved.params.size() == param_groups_[gi].params().size(),
                  "loaded state dict contains a parameter group that doesn't match the size of optimizer's group "
                  "(group ", gi, ": ", saved.params.size(), " vs ", param_groups_[gi].params().size(), ")");
    for (size_t k = 0; k < saved.params.size(); ++k) {
      EMBER_CHECK_T(ValueError, by_index.emplace(saved.params[k], std::make_pair(param_groups_[gi].params()[k], gi)).second,
                    "loaded state dict lists parameter index ", saved.params[k], " more than once (group ", gi, ")");
    }
  }
  // Parse every group's options and build every state tensor before changing anything.
  LoadedState out;
  for (size_t gi = 0; gi < param_groups_.size(); ++gi) {
    auto o = param_groups_[gi].options().clone();
    o->from_json(sd.param_groups[gi].options);
    o->validate();
    out.options.push_back(std::move(o));
  }
  for (const auto& [idx, st] : sd.state) {
    auto it = by_index.find(idx);
    EMBER_CHECK_T(ValueError, it != by_index.end(), "loaded state dict has state for parameter index ", idx,
                  ", which no parameter group holds");
    const Tensor& p = it->second.first;
    ParamState copy;
    for (const auto& [key, t] : st) {
      if (!t.defined()) continue;
      // Per-element state must have the parameter's shape (the fused updates index it directly).
      EMBER_CHECK_T(ValueError, t.dim() == 0 || t.sizes() == p.sizes(), "loaded state dict: state \"", key,
                    "\" of parameter ", idx, " has shape ", t.sizes(), ", the parameter has shape ", p.sizes());
      Tensor v = t;
      if (key != "step" && t.is_floating_point()) {
        v = native::to(t, p.device(), p.dtype());
      } else {
        v = native::to(t, p.device());
      }
      copy[key] = v.is_same(t) ? native::clone(t) : v;
    }
    check_param_state("parameter " + std::to_string(idx), p, copy, *out.options[it->second.second]);
    out.state[p.impl()] = std::move(copy);
  }
  return out;
}

Tensor Optimizer::run_closure(const LossClosure& closure) {
  if (!closure) return Tensor();
  autograd::AutoGradMode enable(true);
  return closure();
}

}  // namespace ember::optim
