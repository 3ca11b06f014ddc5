// Optimizer: the base of SGD, Adam, AdamW, RMSprop and Adagrad (torch.optim.Optimizer). It owns param groups
// (each a list of parameters plus its own hyper-parameters, an OptimizerOptions subclass) and
// per-parameter state tensors keyed by name ("step", "exp_avg", "momentum_buffer", ...).
// state_dict() numbers parameters across groups in order, as PyTorch does, so state is keyed by
// parameter index. step() updates parameters in place under NoGradGuard (versions bump). Not
// thread-safe; one optimizer per training loop.
#pragma once
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/tensor.h"

namespace ember::optim {

/// Declares a hyper-parameter with a chaining setter and a getter, as LibTorch's TORCH_ARG:
/// SGDOptions(0.1).momentum(0.9).nesterov(true).
#define EMBER_OPTIM_ARG(T, name, default_value)        \
 public:                                               \
  auto name(const T& v)->decltype(*this) {             \
    name##_ = v;                                       \
    return *this;                                      \
  }                                                    \
  const T& name() const { return name##_; }            \
                                                       \
 private:                                              \
  T name##_ = default_value;                           \
                                                       \
 public:

/// One hyper-parameter of an OptimizerOptions subclass: its PyTorch key and where it lives.
/// to_json writes the fields in order, from_json reads them, validate checks them.
struct OptionField {
  const char* key;
  std::variant<double*, bool*, std::pair<double, double>*> value;
  /// validate: a negative value is a ValueError in PyTorch's words ("Invalid learning rate: -1",
  /// "Invalid epsilon value: ...", else "Invalid <key> value: ..."). A pair is always checked
  /// as betas: each in [0, 1) ("Invalid beta parameter at index 1: ...").
  bool non_negative = false;
  /// from_json keeps the current value when the key is absent (a key newer than the format).
  bool optional = false;
};

/// A field validate() requires to be >= 0.
inline OptionField non_negative(const char* key, double* value) {
  return {.key = key, .value = value, .non_negative = true};
}
/// A field from_json may find absent (then the value is kept).
inline OptionField optional_field(const char* key, bool* value) { return {.key = key, .value = value, .optional = true}; }

/// Hyper-parameters of one param group. Each optimizer defines its subclass, usually through
/// OptimizerOptionsBase; the JSON and the checks follow from its fields().
class OptimizerOptions {
 public:
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;
  /// Flat JSON object of every hyper-parameter, PyTorch's keys ({"lr":0.001,"betas":[0.9,0.999],...}).
  std::string to_json() const;
  /// Reads what to_json writes. Throws ValueError naming a missing or ill-typed key.
  void from_json(const std::string& json);
  /// Throws ValueError (PyTorch's "Invalid learning rate: -1" etc.) for an invalid value.
  void validate() const;

 protected:
  /// The optimizer's name in from_json's errors ("SGD options: ...").
  virtual const char* owner() const = 0;
  /// Every hyper-parameter, in to_json's key order. Only addresses: to_json and validate read
  /// through them and never write.
  virtual std::vector<OptionField> fields() = 0;
  /// Checks that are not per field (SGD's Nesterov rule), after the fields' own; none by default.
  virtual void check() const {}
};

/// clone, get_lr, set_lr and owner of an options class `Derived` with an EMBER_OPTIM_ARG named
/// lr and a `static constexpr const char* kName` (its optimizer's name, "SGD").
template <class Derived>
class OptimizerOptionsBase : public OptimizerOptions {
 public:
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
  double get_lr() const override { return static_cast<const Derived&>(*this).lr(); }
  void set_lr(double lr) override { static_cast<Derived&>(*this).lr(lr); }

 protected:
  const char* owner() const override { return Derived::kName; }
};

/// Parameters and (optionally) their own options; groups without options take the optimizer's defaults.
class ParamGroup {
 public:
  ParamGroup(std::vector<Tensor> params) : params_(std::move(params)) {}  // NOLINT: implicit, as LibTorch
  ParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options)
      : params_(std::move(params)), options_(std::move(options)) {}
  ParamGroup(const ParamGroup& o) : params_(o.params_), options_(o.options_ ? o.options_->clone() : nullptr) {}
  ParamGroup& operator=(const ParamGroup& o) {
    params_ = o.params_;
    options_ = o.options_ ? o.options_->clone() : nullptr;
    return *this;
  }
  ParamGroup(ParamGroup&&) = default;
  ParamGroup& operator=(ParamGroup&&) = default;

  std::vector<Tensor>& params() { return params_; }
  const std::vector<Tensor>& params() const { return params_; }
  bool has_options() const { return options_ != nullptr; }
  /// Throws Error when the group has no options yet (before it joined an optimizer).
  OptimizerOptions& options();
  const OptimizerOptions& options() const;
  void set_options(std::unique_ptr<OptimizerOptions> options) { options_ = std::move(options); }

 private:
  std::vector<Tensor> params_;
  std::unique_ptr<OptimizerOptions> options_;
};

/// Per-parameter state: named tensors ("step" is a 0-dim float32 tensor, as in PyTorch 1.13).
using ParamState = std::map<std::string, Tensor>;

/// What state_dict() returns and load_state_dict() takes (torch's {"state": ..., "param_groups": ...}).
struct OptimizerStateDict {
  struct Group {
    std::string options;          // OptimizerOptions::to_json()
    std::vector<int64_t> params;  // parameter indices, numbered across groups in order
  };
  std::map<int64_t, ParamState> state;
  std::vector<Group> param_groups;
};

using LossClosure = std::function<Tensor()>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update. With a closure, runs it first (grad mode on) and returns its loss.
  virtual Tensor step(const LossClosure& closure = nullptr) = 0;
  /// The optimizer's PyTorch class name ("SGD", "Adam", "AdamW").
  virtual const char* type_name() const = 0;

  /// set_to_none: drop the .grad tensors (default, as PyTorch 2); else zero them in place.
  void zero_grad(bool set_to_none = true);
  /// Throws ValueError for an empty group, a non-leaf or non-floating tensor, or a parameter
  /// already in another group. A group without options gets a copy of the defaults.
  void add_param_group(ParamGroup group);

  std::vector<ParamGroup>& param_groups() { return param_groups_; }
  const std::vector<ParamGroup>& param_groups() const { return param_groups_; }
  const OptimizerOptions& defaults() const { return *defaults_; }
  /// LibTorch's mutable defaults(): what a group added later copies; existing groups keep theirs.
  OptimizerOptions& defaults() { return *defaults_; }
  /// State of `param` (created empty on first use).
  ParamState& state(const Tensor& param) { return state_[param.impl()]; }
  /// Null when `param` has no state yet.
  const ParamState* find_state(const Tensor& param) const;

  /// State tensors are the live ones (not copies), as in PyTorch.
  OptimizerStateDict state_dict() const;
  /// Copies state in (cloned; floating state other than "step" cast to its parameter's dtype and
  /// device) and takes each group's hyper-parameters. Throws ValueError, changing nothing, when
  /// the group count or a group's size differs, an index is listed twice, state names an index
  /// no group holds, or a parameter's state is not what step() needs (check_param_state), so a
  /// loaded state never fails halfway through a later step().
  void load_state_dict(const OptimizerStateDict& state_dict);
  /// Throws exactly what load_state_dict(state_dict) would, changing nothing.
  void validate_state_dict(const OptimizerStateDict& state_dict) const;

 protected:
  /// Checks one parameter's loaded state (already on the parameter's device and dtype) against
  /// what step() needs: required keys, shapes, dtypes, no unknown key. Throws ValueError naming
  /// `where` ("parameter 3") and the key. The base class accepts any state.
  virtual void check_param_state(const std::string& where, const Tensor& param, const ParamState& state,
                                 const OptimizerOptions& options) const;

  /// For check_param_state: each key of `state` is in `allowed`; a non-empty state has every
  /// `required` key; "step" is a finite 0-dim count >= 0 and the other tensors have the
  /// parameter's shape, dtype and device. Throws ValueError naming `where` and the key.
  void check_tensor_state(const std::string& where, const Tensor& param, const ParamState& state,
                          const std::vector<std::string>& required, const std::vector<std::string>& allowed) const;

  Optimizer(std::vector<ParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults);
  /// Runs `closure` with grad mode on (the loss step() returns), or returns an undefined Tensor.
  static Tensor run_closure(const LossClosure& closure);
  /// Calls f(options, param, grad, state) for every parameter that has a gradient, group by
  /// group: the group's options as Options, the parameter, a handle on its gradient and its
  /// state (created empty on first use).
  template <class Options, class F>
  void for_each_param_with_grad(F&& f) {
    for (auto& group : param_groups_) {
      const auto& options = static_cast<const Options&>(group.options());
      for (Tensor& p : group.params()) {
        Tensor g = p.grad();
        if (g.defined()) f(options, p, std::move(g), state_[p.impl()]);
      }
    }
  }
  /// Advances the "step" count in a parameter's `state`, creating it (a 0-dim float32 tensor)
  /// on the first step together with zeros shaped like `param` under each of `keys` that is
  /// absent. Returns the count after this step (1 for the first).
  static double advance_step(ParamState& state, const Tensor& param, std::initializer_list<const char*> keys);

  std::vector<ParamGroup> param_groups_;
  std::unordered_map<TensorImpl*, ParamState> state_;  // keyed by parameter identity
  std::unique_ptr<OptimizerOptions> defaults_;

 private:
  struct LoadedState {
    std::vector<std::unique_ptr<OptimizerOptions>> options;  // one per group
    std::unordered_map<TensorImpl*, ParamState> state;
  };
  /// Everything load_state_dict checks and builds, before it changes anything.
  LoadedState prepare_load(const OptimizerStateDict& state_dict) const;
};

/// The constructors every optimizer has, as LibTorch's: from param groups, or from one list of
/// parameters, each with the defaults a group without options of its own copies.
/// Also what every step() does around the update: the closure first, then update() (under
/// NoGradGuard), and the name: Options::kName.
template <class Options>
class OptimizerWith : public Optimizer {
 public:
  OptimizerWith(std::vector<ParamGroup> param_groups, const Options& defaults = Options())
      : Optimizer(std::move(param_groups), defaults.clone()) {}
  OptimizerWith(std::vector<Tensor> params, const Options& defaults = Options())
      : OptimizerWith(std::vector<ParamGroup>{ParamGroup(std::move(params))}, defaults) {}

  Tensor step(const LossClosure& closure = nullptr) override {
    Tensor loss = run_closure(closure);
    NoGradGuard no_grad;
    update();
    return loss;
  }
  const char* type_name() const override { return Options::kName; }

 protected:
  OptimizerWith(std::vector<ParamGroup> param_groups, std::unique_ptr<OptimizerOptions> defaults)
      : Optimizer(std::move(param_groups), std::move(defaults)) {}
  /// One update of every parameter with a gradient, in place.
  virtual void update() = 0;
};

}  // namespace ember::optim
