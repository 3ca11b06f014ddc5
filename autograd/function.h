// Custom differentiable functions, as in "Extending PyTorch" / LibTorch's
// torch::autograd::Function<T>: T provides
//   static Tensor (or TensorList) forward(AutogradContext* ctx, Args...);
//   static TensorList backward(AutogradContext* ctx, TensorList grad_outputs);
// and users call T::apply(args...). forward runs with grad mode off; backward returns one
// gradient per Tensor argument of forward (undefined where none flows).
#pragma once
#include <any>
#include <map>
#include <string>
#include <type_traits>

#include "autograd/grad_mode.h"
#include "autograd/node.h"

namespace ember::autograd {

class AutogradContext {
 public:
  void save_for_backward(const TensorList& tensors) {
    saved_.clear();
    for (const auto& t : tensors) saved_.emplace_back(t);
  }
  /// The saved tensors; throws if one was modified in place since it was saved.
  TensorList get_saved_variables() const {
    TensorList out;
    for (const auto& s : saved_) out.push_back(s.defined() ? s.unpack(name_.c_str()) : Tensor());
    return out;
  }
  bool needs_input_grad(size_t i) const { return i < needs_.size() && needs_[i]; }
  /// Arbitrary non-tensor state for backward (ints, doubles, vectors, ...).
  std::map<std::string, std::any> saved_data;

 private:
  template <class T>
  friend struct Function;
  template <class T>
  friend class CppNode;
  std::vector<SavedVariable> saved_;
  std::vector<bool> needs_;
  std::string name_;
};

template <class T>
class CppNode : public Node {
 public:
  explicit CppNode(std::string name) : name_(std::move(name)) { ctx_.name_ = name_; }
  TensorList apply(TensorList&& grads) override {
    TensorList r = T::backward(&ctx_, std::move(grads));
    EMBER_CHECK(r.size() == next_edges_.size(), name_, ".backward: function backward returned an incorrect number of "
                "gradients (expected ", next_edges_.size(), ", got ", r.size(), ")");
    return r;
  }
  std::string name() const override { return name_; }
  void release_variables() override { ctx_.saved_.clear(); }
  AutogradContext ctx_;

 private:
  std::string name_;
};

template <class T>
struct Function {
  template <typename... Args>
  static auto apply(Args&&... args) {
    std::vector<const Tensor*> inputs;
    auto collect = [&](const auto& a) {
      if constexpr (std::is_same_v<std::decay_t<decltype(a)>, Tensor>) inputs.push_back(&a);
    };
    (collect(args), ...);
    bool needs = false;
    if (GradMode::is_enabled()) {
      for (auto* t : inputs) needs = needs || (t->defined() && t->requires_grad());
    }
    std::shared_ptr<CppNode<T>> node;
    AutogradContext local;
    AutogradContext* ctx = &local;
    if (needs) {
      node = std::make_shared<CppNode<T>>(node_name_of());
      ctx = &node->ctx_;
      for (auto* t : inputs) ctx->needs_.push_back(t->defined() && t->requires_grad());
    }
    using Out = decltype(T::forward(ctx, std::forward<Args>(args)...));
    Out out = [&] {
      NoGradGuard no_grad;
      return T::forward(ctx, std::forward<Args>(args)...);
    }();
    if (!needs) return out;
    std::vector<Tensor*> outs;
    if constexpr (std::is_same_v<Out, Tensor>) {
      alias_if_input(out, inputs);
      outs.push_back(&out);
    } else {
      for (auto& o : out) {
        alias_if_input(o, inputs);
        outs.push_back(&o);
      }
    }
    set_history(node, inputs, outs);
    return out;
  }

 private:
  static std::string node_name_of() {
    if constexpr (requires { T::kName; }) {
      return T::kName;
    } else {
      return "CppNode";
    }
  }
  // An output that is an input must not take over the input's history: give it its own handle.
  static void alias_if_input(Tensor& o, const std::vector<const Tensor*>& inputs) {
    for (auto* t : inputs) {
      if (o.is_same(*t)) {
        o = SavedVariable(o).unpack("Function");
        return;
      }
    }
  }
};

}  // namespace ember::autograd
