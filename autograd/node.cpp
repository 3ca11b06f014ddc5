#include "autograd/node.h"

#include <sstream>

#include "autograd/grad_mode.h"
#include "core/ops/native.h"

namespace ember::autograd {
namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
}

Node::Node() : sequence_nr_(g_next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

Node::~Node() {
  // Take over predecessors that only we keep alive and free them one at a time.
  std::vector<std::shared_ptr<Node>> stack;
  auto adopt = [&stack](std::vector<Edge>& edges) {
    for (auto& e : edges) {
      if (e.fn && e.fn.use_count() == 1) stack.push_back(std::move(e.fn));
    }
  };
  adopt(next_edges_);
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    adopt(n->next_edges_);
  }
}

void Node::add_output(const Tensor& t) {
  if (num_outputs_ == 0) {
    output0_ = t.impl_ptr();
  } else {
    more_outputs_.push_back(t.impl_ptr());
  }
  ++num_outputs_;
}

std::string node_name(const Node* n) { return n ? n->name() : "None"; }

// ---- SavedVariable ---------------------------------------------------------------------

Tensor alias_without_history(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>();
  const TensorImpl* src = t.impl();
  impl->storage = src->storage;
  impl->sizes = src->sizes;
  impl->strides = src->strides;
  impl->offset = src->offset;
  impl->numel = src->numel;
  impl->dtype = src->dtype;
  impl->contiguous = src->contiguous;
  impl->version = src->version;
  impl->inference = src->inference;
  return Tensor(std::move(impl));
}

SavedVariable::SavedVariable(const Tensor& t) {
  if (!t.defined()) return;
  // See Note [Inference tensors] in autograd/inference_mode.h.
  EMBER_CHECK(!t.is_inference() || InferenceModeState::is_enabled(),
              "Inference tensors cannot be saved for backward. To work around you can make a clone to get a normal "
              "tensor and use it in autograd.");
  data_ = alias_without_history(t);
  saved_version_ = t.version();
}

Tensor SavedVariable::unpack(const char* op) const {
  EMBER_CHECK(data_.defined(), op, ": trying to backward through the graph a second time (or directly access saved "
              "tensors after they have already been freed). Saved intermediate values of the graph are freed when you "
              "call backward(). Specify retain_graph=true if you need to backward through the graph a second time.");
  uint32_t now = data_.version();
  if (now != saved_version_) {
    std::ostringstream os;
    os << "one of the variables needed for gradient computation has been modified by an inplace operation: ["
       << data_.dtype() << " " << data_.sizes() << "], which is saved by " << op << ", is at version " << now
       << "; expected version " << saved_version_
       << " instead. Hint: the operation that modified it ran between the forward op and backward()";
    EMBER_THROW(Error, os.str());
  }
  return data_;
}

// ---- AccumulateGrad ---------------------------------------------------------------------

AccumulateGrad::AccumulateGrad(Tensor variable) : variable_(std::move(variable)) {
  set_device(variable_.device());
}

TensorList AccumulateGrad::apply(TensorList&& grads) {
  Tensor g = std::move(grads[0]);
  if (!g.defined()) return {};
  auto* meta = variable_.autograd_meta();
  // Tensor hooks on a leaf run before accumulation.
  for (auto& [id, hook] : meta->hooks) {
    Tensor r = hook(g);
    if (r.defined()) g = r;
  }
  Tensor& slot = variable_.mutable_grad();
  if (!slot.defined()) {
    // Steal the buffer when nobody else holds it, like PyTorch; otherwise copy.
    if (g.impl_ptr().use_count() == 1 && g.is_contiguous() && !g.impl()->is_view && g.sizes() == variable_.sizes()) {
      slot = g;
    } else {
      slot = native::clone(g.sizes() == variable_.sizes() ? g : native::sum_to_size(g, variable_.sizes()));
    }
  } else {
    native::add_(slot, g);
  }
  for (auto& [id, hook] : meta->post_accumulate_hooks) hook(variable_);
  return {};
}

// ---- recording ----------------------------------------------------------------------------

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
  auto& meta = leaf.ensure_autograd_meta();
  if (auto acc = meta.grad_accumulator.lock()) return acc;
  auto acc = std::make_shared<AccumulateGrad>(leaf);
  meta.grad_accumulator = acc;
  return acc;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined()) return {};
  auto* meta = t.autograd_meta();
  if (!meta) return {};
  if (meta->grad_fn) return {meta->grad_fn, meta->output_nr};
  if (meta->requires_grad) return {grad_accumulator(t), 0};
  return {};
}

bool any_requires_grad(std::initializer_list<const Tensor*> ts) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : ts) {
    if (t->defined() && t->requires_grad()) return true;
  }
  return false;
}

namespace {
template <typename In, typename Out>
void set_history_impl(const std::shared_ptr<Node>& node, const In& inputs, const Out& outputs) {
  auto& edges = node->mutable_next_edges();
  edges.reserve(edges.size() + inputs.size());
  for (const Tensor* t : inputs) edges.push_back(gradient_edge(*t));
  uint32_t nr = node->num_outputs();
  for (Tensor* out : outputs) {
    auto& m = out->ensure_autograd_meta();
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = nr++;
    node->add_output(*out);
  }
  bool device_set = false;
  for (Tensor* out : outputs) {
    if (!device_set && out->defined()) {
      node->set_device(out->device());
      device_set = true;
    }
  }
  if (AnomalyMode::is_enabled() && node->forward_context().empty()) {
    std::ostringstream os;
    os << "forward op " << node->name() << " with inputs";
    for (const Tensor* t : inputs) os << " " << (t->defined() ? t->sizes() : IntList{});
    node->set_forward_context(os.str());
  }
}
}  // namespace

void set_history(const std::shared_ptr<Node>& node, std::initializer_list<const Tensor*> inputs,
                 std::initializer_list<Tensor*> outputs) {
  set_history_impl(node, inputs, outputs);
}
void set_history(const std::shared_ptr<Node>& node, const std::vector<const Tensor*>& inputs,
                 const std::vector<Tensor*>& outputs) {
  set_history_impl(node, inputs, outputs);
}


}  // namespace ember::autograd
