// The autograd graph: Node (one backward function), Edge (where a gradient goes next),
// SavedVariable (a tensor saved for backward with the version it had), AccumulateGrad (the
// sink of a leaf), and the helpers ops use to record history. A graph is built by one thread
// and executed by the Engine; a Node is run by one engine thread at a time.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::autograd {

class Node;
using TensorList = std::vector<Tensor>;

struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  /// Releases long chains of predecessors iteratively (no deep recursion on 100k-op graphs).
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// Gradients w.r.t. this node's forward outputs in, gradients for next_edges() out
  /// (undefined Tensors where an edge is invalid or no gradient flows).
  virtual TensorList apply(TensorList&& grads) = 0;
  virtual std::string name() const = 0;
  /// Drops saved tensors after backward without retain_graph.
  virtual void release_variables() {}

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  std::vector<Edge>& mutable_next_edges() { return next_edges_; }
  bool needs_input_grad(size_t i) const { return i < next_edges_.size() && next_edges_[i].valid(); }
  uint64_t sequence_nr() const { return sequence_nr_; }
  Device device() const { return device_; }
  void set_device(Device d) { device_ = d; }
  uint32_t num_outputs() const { return num_outputs_; }

  /// Forward outputs (weakly held) so the engine can run their hooks and retain_grad.
  void add_output(const Tensor& t);
  /// The forward output `i`, if it is still alive.
  std::shared_ptr<TensorImpl> output(uint32_t i) const {
    return i == 0 ? output0_.lock() : (i - 1 < more_outputs_.size() ? more_outputs_[i - 1].lock() : nullptr);
  }

  /// Anomaly mode: the forward op that created this node.
  const std::string& forward_context() const { return forward_context_; }
  void set_forward_context(std::string s) { forward_context_ = std::move(s); }

 protected:
  std::vector<Edge> next_edges_;

 private:
  uint64_t sequence_nr_;
  Device device_;
  uint32_t num_outputs_ = 0;
  std::weak_ptr<TensorImpl> output0_;
  std::vector<std::weak_ptr<TensorImpl>> more_outputs_;
  std::string forward_context_;

 public:
  // Engine bookkeeping for the one backward pass using this node, guarded by that pass's
  // mutex (see Note [Engine threads]).
  void* engine_task_ = nullptr;
  int engine_deps_ = 0;
  TensorList engine_inputs_;
};

std::string node_name(const Node* n);

/// A new handle over t's data (same storage, geometry, version counter and inference flag)
/// without autograd metadata: what detach() returns and what SavedVariable keeps.
Tensor alias_without_history(const Tensor& t);

/// A tensor saved for backward. Holds the data without autograd metadata (no reference
/// cycles through grad_fn) and the version at save time; unpack() throws if it changed.
class SavedVariable {
 public:
  SavedVariable() = default;
  /// Throws Error for an inference tensor outside InferenceMode (Note [Inference tensors]).
  explicit SavedVariable(const Tensor& t);
  /// Returns the saved tensor, or throws Error naming `op` when it was modified in place.
  Tensor unpack(const char* op) const;
  void reset() { data_ = Tensor(); }
  bool defined() const { return data_.defined(); }

 private:
  Tensor data_;
  uint32_t saved_version_ = 0;
};

/// Accumulates incoming gradients into a leaf's .grad and runs its post-accumulate hooks.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  TensorList apply(TensorList&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  const Tensor& variable() const { return variable_; }

 private:
  Tensor variable_;
};

/// A node whose backward is a callable taking (FunctionNode& self, TensorList& grads).
class FunctionNode : public Node {
 public:
  using Backward = std::function<TensorList(FunctionNode& self, TensorList& grads)>;
  FunctionNode(const char* name, Backward backward) : name_(name), backward_(std::move(backward)) {}
  TensorList apply(TensorList&& grads) override {
    check_not_released();
    return call(grads);
  }
  std::string name() const override { return name_; }
  void release_variables() override {
    released_ = true;
    drop();
  }
  bool released() const { return released_; }

 protected:
  explicit FunctionNode(const char* name) : name_(name) {}
  virtual TensorList call(TensorList& grads) { return backward_(*this, grads); }
  virtual void drop() { backward_ = nullptr; }
  void check_not_released() const {
    EMBER_CHECK(!released_, "trying to backward through the graph a second time (or directly access saved tensors "
                "after they have already been freed). Saved intermediate values of the graph are freed when you call "
                "backward(). Specify retain_graph=true if you need to backward through the graph a second time.");
  }

 private:
  const char* name_;
  Backward backward_;
  bool released_ = false;
};

/// FunctionNode holding its lambda inline (one allocation per recorded op).
template <typename F>
class LambdaNode final : public FunctionNode {
 public:
  LambdaNode(const char* name, F f) : FunctionNode(name), f_(std::move(f)) {}

 protected:
  TensorList call(TensorList& grads) override { return (*f_)(static_cast<FunctionNode&>(*this), grads); }
  void drop() override { f_.reset(); }

 private:
  std::optional<F> f_;
};

/// The edge a gradient for `t` should flow along (grad_fn, or the leaf's accumulator).
Edge gradient_edge(const Tensor& t);
/// The leaf's AccumulateGrad node (created on first use; the leaf keeps it alive weakly).
std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);
/// True when grad mode is on and any of the tensors requires grad.
bool any_requires_grad(std::initializer_list<const Tensor*> ts);
/// Connects `node` to `inputs` and makes it the grad_fn of `outputs` (in order).
void set_history(const std::shared_ptr<Node>& node, std::initializer_list<const Tensor*> inputs,
                 std::initializer_list<Tensor*> outputs);
void set_history(const std::shared_ptr<Node>& node, const std::vector<const Tensor*>& inputs,
                 const std::vector<Tensor*>& outputs);
/// Records a FunctionNode for outputs computed from inputs; no-op when no input needs grad.
/// `backward(FunctionNode& self, TensorList& grads) -> TensorList` (one gradient per input).
/// Returns the node (or null).
template <typename F>
std::shared_ptr<FunctionNode> record(const char* name, std::initializer_list<const Tensor*> inputs,
                                     std::initializer_list<Tensor*> outputs, F&& backward) {
  if (!any_requires_grad(inputs)) return nullptr;
  auto node = std::make_shared<LambdaNode<std::decay_t<F>>>(name, std::forward<F>(backward));
  set_history(node, inputs, outputs);
  return node;
}

}  // namespace ember::autograd
