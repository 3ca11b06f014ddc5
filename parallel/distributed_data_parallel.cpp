#include "parallel/distributed_data_parallel.h"

#include <algorithm>
#include <unordered_set>

#include "core/ops/native.h"

namespace ember::parallel::detail {

void broadcast_tensors(ProcessGroup& group, const std::vector<Tensor>& tensors, int64_t timeout_ms) {
  if (group.size() == 1 || tensors.empty()) return;
  // Coalesce per dtype into one flat buffer: one collective instead of one per tensor.
  std::vector<DType> order;
  for (const auto& t : tensors) {
    if (std::find(order.begin(), order.end(), t.dtype()) == order.end()) order.push_back(t.dtype());
  }
  for (DType dt : order) {
    std::vector<Tensor> parts;
    for (const auto& t : tensors) {
      if (t.dtype() == dt) parts.push_back(native::reshape(native::contiguous(t), {-1}));
    }
    Tensor flat = native::cat(parts, 0);
    group.broadcast(flat, 0)->wait(timeout_ms);
    NoGradGuard no_grad;
    int64_t off = 0;
    for (const auto& t : tensors) {
      if (t.dtype() != dt) continue;
      Tensor dst = t;
      native::copy_(dst, native::view(native::narrow(flat, 0, off, t.numel()), t.sizes()));
      off += t.numel();
    }
  }
}

std::vector<bool> reachable_parameters(const std::vector<Tensor>& outputs, const std::vector<Tensor>& params) {
  std::unordered_set<const TensorImpl*> found;
  std::unordered_set<const autograd::Node*> seen;
  std::vector<const autograd::Node*> stack;
  for (const auto& o : outputs) {
    if (!o.defined()) continue;
    if (o.grad_fn()) {
      stack.push_back(o.grad_fn().get());
    } else if (o.requires_grad()) {
      found.insert(o.impl());
    }
  }
  while (!stack.empty()) {
    const autograd::Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (auto* acc = dynamic_cast<const autograd::AccumulateGrad*>(n)) found.insert(acc->variable().impl());
    for (const auto& e : n->next_edges()) {
      if (e.valid()) stack.push_back(e.fn.get());
    }
  }
  std::vector<bool> used(params.size());
  for (size_t i = 0; i < params.size(); ++i) used[i] = found.count(params[i].impl()) > 0;
  return used;
}

}  // namespace ember::parallel::detail
