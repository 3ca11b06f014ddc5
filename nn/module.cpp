#include "nn/module.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <typeinfo>
#include <set>
#include <sstream>
#include <unordered_set>

#include "core/ops/native.h"
#include "nn/container.h"

namespace ember::nn {

namespace detail {
namespace {
thread_local bool t_skip_init = false;
}
SkipInitGuard::SkipInitGuard() : prev_(t_skip_init) { t_skip_init = true; }
SkipInitGuard::~SkipInitGuard() { t_skip_init = prev_; }
bool SkipInitGuard::active() { return t_skip_init; }

namespace {
thread_local const CloneParameterSource* t_clone_parameter_source = nullptr;
}
CloneParameterSourceGuard::CloneParameterSourceGuard(const CloneParameterSource* source)
    : prev_(t_clone_parameter_source) {
  if (source != nullptr) t_clone_parameter_source = source;
}
CloneParameterSourceGuard::~CloneParameterSourceGuard() { t_clone_parameter_source = prev_; }
const CloneParameterSource* CloneParameterSourceGuard::current() { return t_clone_parameter_source; }
}  // namespace detail

namespace {
void check_name(const std::string& name, const char* what) {
  EMBER_CHECK_T(ValueError, !name.empty() && name.find('.') == std::string::npos, "register_", what, ": ", what,
                " name can't be empty or contain \".\", got \"", name, "\"");
}
template <typename V>
bool has_name(const V& v, const std::string& n) {
  return std::any_of(v.begin(), v.end(), [&](const auto& p) { return p.first == n; });
}
}  // namespace

Tensor& Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_name(name, "parameter");
  EMBER_CHECK_T(ValueError, !has_name(parameters_, name) && !has_name(buffers_, name) && !has_name(children_, name),
                "register_parameter: attribute \"", name, "\" already exists in ", name_);
  if (t.defined() && requires_grad) t.requires_grad_(true);
  parameters_.emplace_back(name, std::move(t));
  return parameters_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  check_name(name, "buffer");
  EMBER_CHECK_T(ValueError, !has_name(parameters_, name) && !has_name(buffers_, name) && !has_name(children_, name),
                "register_buffer: attribute \"", name, "\" already exists in ", name_);
  buffers_.emplace_back(name, std::move(t));
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_name(name, "module");
  EMBER_CHECK_T(ValueError, m != nullptr, "register_module: submodule \"", name, "\" is null");
  EMBER_CHECK_T(ValueError, !has_name(parameters_, name) && !has_name(buffers_, name) && !has_name(children_, name),
                "register_module: attribute \"", name, "\" already exists in ", name_);
  children_.emplace_back(name, std::move(m));
}

namespace {
void collect(const Module& m, const std::string& prefix, bool recurse, bool params, StateDict& out);
}

// Note [Shared parameters]
// A tensor registered in two places (tied input/output embeddings: the decoder's weight slot
// holds the encoder's weight) is one parameter. named_parameters() and parameters() list it
// once, under the first name in registration order (PyTorch's remove_duplicate=True), so that
// optimizers, clip_grad_norm_, DataParallel and DistributedDataParallel see it once and
// clip_grad_norm_ does not count its gradient twice. state_dict() keeps every name (a
// checkpoint has both keys, as PyTorch's does). named_parameters(recurse, false) lists every
// slot: replicate maps a clone's slots to the original's with it.
NamedTensors Module::named_parameters(bool recurse, bool remove_duplicate) const {
  StateDict out;
  collect(*this, "", recurse, true, out);
  if (remove_duplicate) {
    std::unordered_set<const TensorImpl*> seen;
    std::erase_if(out, [&](const auto& entry) { return !seen.insert(entry.second.impl()).second; });
  }
  return out;
}
NamedTensors Module::named_buffers(bool recurse) const {
  StateDict out;
  collect(*this, "", recurse, false, out);
  return out;
}

namespace {
// Reads another module's protected lists through pointers to members of Module. (Casting the
// Module to ModuleAccess instead is undefined behaviour, no such object exists: UBSan's vptr
// check in the clang fuzz build reported it on every state_dict().)
struct ModuleAccess : Module {
  static const std::vector<std::pair<std::string, Tensor>>& params(const Module& m) {
    return m.*(&ModuleAccess::parameters_);
  }
  static const std::vector<std::pair<std::string, Tensor>>& bufs(const Module& m) {
    return m.*(&ModuleAccess::buffers_);
  }
};
void collect(const Module& m, const std::string& prefix, bool recurse, bool params, StateDict& out) {
  const auto& own = params ? ModuleAccess::params(m) : ModuleAccess::bufs(m);
  for (const auto& [n, t] : own) {
    if (t.defined()) out.emplace_back(prefix + n, t);
  }
  if (!recurse) return;
  for (const auto& [cn, c] : m.named_children()) collect(*c, prefix + cn + ".", true, params, out);
}
}  // namespace

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}
std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}
std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [n, c] : children_) out.push_back(c);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (auto& [n, c] : children_) {
    for (auto& [cn, cm] : c->named_modules()) out.emplace_back(cn.empty() ? n : n + "." + cn, cm);
  }
  return out;
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [n, c] : children_) c->apply(fn);
  fn(*this);
}

Tensor* Module::find_parameter(const std::string& name) {
  for (auto& [n, t] : parameters_) {
    if (n == name) return &t;
  }
  return nullptr;
}
Tensor* Module::find_buffer(const std::string& name) {
  for (auto& [n, t] : buffers_) {
    if (n == name) return &t;
  }
  return nullptr;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

namespace {
// Replaces the data of `t` in place (the same TensorImpl, so every handle sees it).
void move_impl(Tensor& t, const Tensor& moved) {
  if (moved.is_same(t)) return;
  TensorImpl* dst = t.impl();
  const TensorImpl* src = moved.impl();
  dst->storage = src->storage;
  dst->sizes = src->sizes;
  dst->strides = src->strides;
  dst->offset = src->offset;
  dst->dtype = src->dtype;
  dst->refresh();
  dst->version->version.fetch_add(1);
  if (dst->autograd && dst->autograd->grad && dst->autograd->grad->defined()) {
    *dst->autograd->grad = native::to(*dst->autograd->grad, moved.device(), moved.dtype());
  }
}
}  // namespace

void Module::set_data(Tensor& slot, const Tensor& data) { move_impl(slot, data); }

void Module::to(Device device) {
  for (auto& [n, t] : parameters_) {
    if (t.defined()) move_impl(t, native::to(t, device));
  }
  for (auto& [n, t] : buffers_) {
    if (t.defined()) move_impl(t, native::to(t, device));
  }
  for (auto& [n, c] : children_) c->to(device);
}

void Module::to(DType dtype) {
  for (auto& [n, t] : parameters_) {
    if (t.defined() && t.is_floating_point()) move_impl(t, native::to(t, dtype));
  }
  for (auto& [n, t] : buffers_) {
    if (t.defined() && t.is_floating_point()) move_impl(t, native::to(t, dtype));
  }
  for (auto& [n, c] : children_) c->to(dtype);
}

void Module::zero_grad(bool set_to_none) {
  for (auto& p : parameters()) {
    auto* m = p.autograd_meta();
    if (!m || !m->grad || !m->grad->defined()) continue;
    if (set_to_none) {
      *m->grad = Tensor();
    } else {
      native::zero_(*m->grad);
    }
  }
}

StateDict Module::state_dict() const {
  StateDict out;
  std::function<void(const Module&, const std::string&)> rec = [&](const Module& m, const std::string& prefix) {
    for (const auto& [n, t] : ModuleAccess::params(m)) {
      if (t.defined()) out.emplace_back(prefix + n, t);
    }
    for (const auto& [n, t] : ModuleAccess::bufs(m)) {
      if (t.defined()) out.emplace_back(prefix + n, t);
    }
    for (const auto& [cn, c] : m.named_children()) rec(*c, prefix + cn + ".");
  };
  rec(*this, "");
  return out;
}

void Module::validate_state_dict(const StateDict& state, bool strict) const {
  using ember::operator<<;
  StateDict mine = state_dict();
  std::vector<std::string> missing, unexpected, mismatched;
  std::set<std::string> seen;
  for (const auto& [k, v] : state) {
    EMBER_CHECK_T(ValueError, seen.insert(k).second, "load_state_dict for ", name_, ": key \"", k,
                  "\" appears more than once in the state_dict");
    EMBER_CHECK_T(ValueError, v.defined(), "load_state_dict for ", name_, ": the tensor for key \"", k,
                  "\" is undefined");
    // [&key = k]: clang 14 (the fuzz build) cannot capture a structured binding.
    auto it = std::find_if(mine.begin(), mine.end(), [&key = k](const auto& p) { return p.first == key; });
    if (it == mine.end()) {
      unexpected.push_back(k);
      continue;
    }
    if (it->second.sizes() != v.sizes()) {
      std::ostringstream os;
      os << k << ": copying a param with shape " << v.sizes() << " from checkpoint, the shape in current model is "
         << it->second.sizes() << ".";
      mismatched.push_back(os.str());
      continue;
    }
  }
  for (const auto& [k, v] : mine) {
    if (!seen.count(k)) missing.push_back(k);
  }
  bool fail = !mismatched.empty() || (strict && (!missing.empty() || !unexpected.empty()));
  if (fail) {
    std::ostringstream os;
    os << "Error(s) in loading state_dict for " << name_ << ":";
    auto list = [&](const char* what, const std::vector<std::string>& v) {
      if (v.empty()) return;
      os << "\n\t" << what << ": ";
      for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << '"' << v[i] << '"';
      os << ".";
    };
    if (strict) {
      list("Missing key(s) in state_dict", missing);
      list("Unexpected key(s) in state_dict", unexpected);
    }
    // PyTorch: one line per tensor, "size mismatch for <key>: copying a param with shape ...".
    for (const auto& m : mismatched) os << "\n\tsize mismatch for " << m;
    EMBER_THROW(ValueError, os.str());
  }
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  validate_state_dict(state, strict);  // nothing below can fail on a validated state
  StateDict mine = state_dict();
  NoGradGuard no_grad;
  for (const auto& [k, v] : state) {
    auto it = std::find_if(mine.begin(), mine.end(), [&key = k](const auto& p) { return p.first == key; });
    if (it == mine.end()) continue;  // unexpected key under strict=false
    Tensor d = it->second;
    native::copy_(d, v);
  }
}

void Module::copy_values_from(const Module& other, std::optional<Device> device) {
  training_ = other.training_;
  auto copy_list = [&](std::vector<std::pair<std::string, Tensor>>& mine,
                       const std::vector<std::pair<std::string, Tensor>>& theirs, bool params) {
    EMBER_INTERNAL_ASSERT(mine.size() == theirs.size(), "clone: reset() of ", name_, " registered ", mine.size(),
                          " entries, the original has ", theirs.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      const Tensor& src = theirs[i].second;
      if (!src.defined()) {
        mine[i].second = Tensor();
        continue;
      }
      const Device target = device ? *device : src.device();
      Tensor data;
      const detail::CloneParameterSource* source = params ? detail::CloneParameterSourceGuard::current() : nullptr;
      if (source != nullptr) data = (*source)(src, target);  // see CloneParameterSourceGuard
      if (!data.defined()) {
        data = target == src.device() ? native::clone(src) : native::to(src, target);  // one copy either way
      }
      bool rg = params && src.requires_grad();
      Tensor& slot = mine[i].second;
      if (slot.defined()) {
        move_impl(slot, data);
        if (data.impl()->version == src.impl()->version) slot.impl()->version = src.impl()->version;  // an alias
      } else {
        slot = data;
      }
      if (rg && !slot.requires_grad()) slot.requires_grad_(true);
    }
  };
  copy_list(parameters_, other.parameters_, true);
  copy_list(buffers_, other.buffers_, false);
  EMBER_INTERNAL_ASSERT(children_.size() == other.children_.size(), "clone: reset() of ", name_,
                        " registered a different number of submodules");
  for (size_t i = 0; i < children_.size(); ++i) children_[i].second->copy_values_from(*other.children_[i].second, device);
}

std::shared_ptr<Module> Module::clone(std::optional<Device>) const {
  EMBER_THROW(NotImplementedError, "clone: ", name_,
              " does not support clone(); derive it from nn::Cloneable<", name_, "> and build it in reset()");
}

std::string Module::display_name() const {
  if (name_ != "Module") return name_;
  int status = 0;
  char* demangled = abi::__cxa_demangle(typeid(*this).name(), nullptr, nullptr, &status);
  std::string n = status == 0 && demangled ? demangled : typeid(*this).name();
  std::free(demangled);
  if (auto lt = n.find('<'); lt != std::string::npos) n.erase(lt);  // template arguments
  if (auto colon = n.rfind("::"); colon != std::string::npos) n.erase(0, colon + 2);
  if (n.size() > 4 && n.ends_with("Impl")) n.erase(n.size() - 4);
  return n;
}

void Module::pretty_print(std::ostream& os) const { detail::print_children(os, *this); }

std::ostream& operator<<(std::ostream& os, const Module& m) {
  m.pretty_print(os);
  return os;
}

}  // namespace ember::nn
