// Module: the base of every layer. It owns named parameters, buffers and submodules (in
// registration order), switches train/eval, moves to devices/dtypes, produces and loads state
// dicts, and deep-copies itself (clone) for DataParallel's replicate. Layers derive from
// Cloneable<Derived> and build their parameters/submodules in reset(), which the constructor
// calls. Each module has a typed forward(...) (no type-erased argument lists). A Module is not
// thread-safe; replicas (clones) may be used from different threads concurrently.
#pragma once
#include <concepts>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "core/ordered_dict.h"
#include "core/tensor.h"

namespace ember::nn {

/// Ordered name -> tensor list (PyTorch's OrderedDict state dict).
using StateDict = std::vector<std::pair<std::string, Tensor>>;
/// What named_parameters() / named_buffers() return: LibTorch's OrderedDict (items with key() /
/// value(), lookup by name), also a StateDict where one is expected.
using NamedTensors = OrderedDict<std::string, Tensor>;

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string name = "Module") : name_(std::move(name)) {}
  virtual ~Module() = default;
  Module(const Module&) = default;
  Module& operator=(const Module&) = default;

  // ---- registration -----------------------------------------------------------------------
  /// Registers `t` (made a leaf that requires grad unless requires_grad=false) and returns it.
  Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }
  /// A module holder (nn/module_holder.h: EMBER_MODULE) registers the module it holds.
  template <class Holder>
    requires requires(const Holder& h) {
      typename Holder::ContainedType;
      { h.ptr() } -> std::convertible_to<std::shared_ptr<typename Holder::ContainedType>>;
    }
  Holder register_module(const std::string& name, Holder holder) {
    add_child(name, holder.ptr());
    return holder;
  }

  // ---- access (recursive names are dotted: "lstm.weight_ih_l0") ------------------------------
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// Each tensor once, under its first name (Note [Shared parameters] in module.cpp);
  /// remove_duplicate=false lists every registration slot.
  NamedTensors named_parameters(bool recurse = true, bool remove_duplicate = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  /// This module and all descendants, depth first, with dotted names ("" for this one).
  std::vector<std::pair<std::string, Module*>> named_modules();
  void apply(const std::function<void(Module&)>& fn);
  /// The parameter/buffer slot with this (non-dotted) name, or null.
  Tensor* find_parameter(const std::string& name);
  Tensor* find_buffer(const std::string& name);

  // ---- modes and placement ------------------------------------------------------------------------
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  /// Moves every parameter and buffer (in place: the same Tensor handles see the new data).
  virtual void to(Device device);
  virtual void to(DType dtype);
  void to(Device device, DType dtype) { to(device); to(dtype); }
  void zero_grad(bool set_to_none = true);
  /// Points the registered tensor `slot` at `data`'s storage, sizes and strides in place (the
  /// same handle, so optimizers holding it see the new data; its version is bumped and a grad
  /// follows data's device and dtype), as to(device) does. For layers that re-lay out their
  /// parameters (Note [RNN flat weights] in core/ops/rnn_flat_weights.cpp).
  static void set_data(Tensor& slot, const Tensor& data);

  // ---- state ---------------------------------------------------------------------------------------
  /// Parameters then buffers of each module, depth first, PyTorch's key names.
  StateDict state_dict() const;
  /// Copies values in. strict: missing and unexpected keys are an error. A shape mismatch is
  /// always an error. The message lists every missing, unexpected and mismatched key; nothing is
  /// modified when it throws. A key given twice, or an undefined tensor, is a ValueError naming
  /// the key.
  void load_state_dict(const StateDict& state, bool strict = true);
  /// Throws exactly what load_state_dict(state, strict) would, changing nothing.
  void validate_state_dict(const StateDict& state, bool strict = true) const;

  /// Deep copy (parameters copied to `device` if given). The copy's parameters are new leaves.
  virtual std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const;

  const std::string& name() const { return name_; }
  /// The name printing uses: name(), or for a module built without one (a user's module) its
  /// class name without namespaces and a trailing "Impl" ("RNNModelImpl" -> "RNNModel").
  std::string display_name() const;
  /// PyTorch's repr: "Name(\n  (child): ...\n)" with each child's own line, "Name()" when
  /// there are none. Layers override it to print their arguments ("Linear(in_features=...").
  virtual void pretty_print(std::ostream& os) const;

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  /// For Cloneable: drop registrations so reset() can rebuild them.
  void clear_registrations() {
    parameters_.clear();
    buffers_.clear();
    children_.clear();
  }
  /// Copies parameter/buffer values (and training flag) from `other`, which has this structure,
  /// then does the same for each child. Virtual for layers that lay their parameters out
  /// themselves (RNNBase re-flattens: Note [RNN flat weights]).
  virtual void copy_values_from(const Module& other, std::optional<Device> device);

  std::string name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

std::ostream& operator<<(std::ostream& os, const Module& m);

namespace detail {
/// While alive in a thread, nn::init functions do nothing: clone() rebuilds structure with
/// reset() and then copies values, so re-initialization (and its random numbers) is skipped.
class SkipInitGuard {
 public:
  SkipInitGuard();
  ~SkipInitGuard();
  static bool active();

 private:
  bool prev_;
};

/// Where clone() takes a parameter's data on the clone's device: a defined result is taken as
/// is (the clone's parameter is a fresh leaf over that memory, no copy); an undefined one means
/// copy the original as usual. Buffers are always copied.
using CloneParameterSource = std::function<Tensor(const Tensor& original, Device device)>;

/// While alive in a thread, clone() asks `source` for every parameter (a null source changes
/// nothing). Replication policies (parallel/replicate_parameters.h) are installed this way; the
/// source must outlive the guard.
class CloneParameterSourceGuard {
 public:
  explicit CloneParameterSourceGuard(const CloneParameterSource* source);
  ~CloneParameterSourceGuard();
  CloneParameterSourceGuard(const CloneParameterSourceGuard&) = delete;
  CloneParameterSourceGuard& operator=(const CloneParameterSourceGuard&) = delete;
  /// The innermost guard's source, or nullptr.
  static const CloneParameterSource* current();

 private:
  const CloneParameterSource* prev_;
};
}  // namespace detail

/// CRTP base giving Derived a clone(): copy-construct, rebuild registrations with reset()
/// (without re-initializing), then copy parameter and buffer values.
template <class Derived>
class Cloneable : public Module {
 public:
  using Module::Module;
  /// (Re)creates all parameters, buffers and submodules. Called by the constructor and clone().
  /// Derived must override it: see Note [Cloneable's reset check].
  virtual void reset() {}

  // Note [Cloneable's reset check]
  // reset() is not pure: a pure one made a Derived without it abstract, and the first error a
  // program met was std::make_shared's "invalid new-expression of abstract class type" with
  // pages of standard-library context. Instead clone(), which every Derived instantiates (it is
  // virtual, so its vtable needs it), asserts that Derived overrides reset(): the one error.
  std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const override {
    static_assert(!std::is_same_v<decltype(&Derived::reset), void (Cloneable::*)()>,
                  "Cloneable<T>: T must override `void reset()`, which (re)creates T's parameters and submodules");
    if constexpr (std::is_abstract_v<Derived>) {
      static_assert(!std::is_abstract_v<Derived>, "Cloneable<T>: T is abstract (a pure virtual function left)");
      return nullptr;
    } else {
      return clone_impl(device);
    }
  }
  std::shared_ptr<Derived> clone_as(std::optional<Device> device = std::nullopt) const {
    return std::static_pointer_cast<Derived>(clone(device));
  }
  /// module(x) as in LibTorch: Derived's forward with the same arguments (nn::Linear fc(2, 3);
  /// fc(x); through a shared_ptr, (*fc)(x); EMBER_MODULE holders add model(x)).
  template <class... Args>
  decltype(auto) operator()(Args&&... args) {
    return static_cast<Derived&>(*this).forward(std::forward<Args>(args)...);
  }

 private:
  std::shared_ptr<Module> clone_impl(std::optional<Device> device) const {
    auto copy = std::make_shared<Derived>(static_cast<const Derived&>(*this));
    copy->clear_registrations();
    {
      detail::SkipInitGuard skip;
      NoGradGuard no_grad;
      copy->reset();
    }
    copy->copy_values_from(*this, device);
    return copy;
  }
};

}  // namespace ember::nn
