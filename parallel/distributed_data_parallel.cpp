#include "parallel/distributed_data_parallel.h"

#include <algorithm>
#include <unordered_set>

#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember::parallel::detail {

// Note [Join]
// Uneven inputs, as PyTorch's Join: inside ddp.join(fn) every forward starts with one small
// all_reduce (a float tensor of world + 1 slots: slot r is 1 when rank r is still training,
// the last slot counts the ranks that will reduce gradients in this iteration's backward).
// When rank r's loop ends, join() keeps answering those rounds with zeros and, for each round
// whose ranks reduce gradients, runs the same bucket all_reduces on zero buckets
// (Reducer::shadow_all_reduce), so the ranks still training never wait for it. The gradient
// buckets are then all_reduced with SUM and divided by the world size
// (divide_by_initial_world_size, PyTorch's default) or by the ranks that contributed.
// Buffers are broadcast from the highest rank still training (PyTorch's authoritative rank)
// instead of rank 0, which may have joined. A round with no rank active ends join() on every
// rank at the same round; the last rank to join (the highest active rank of the last round
// that had one) then broadcasts its parameters and buffers, so every rank ends with the
// model of the ranks that trained longest. Every rank sees the same rounds, so they agree on
// it without another message.

// Note [Static graph]
// PyTorch's static_graph: the user promises that every iteration uses the same parameters.
// The first synchronized iteration finds them with find_unused_parameters' walk of the
// autograd graph from the outputs (so unused parameters are marked ready with zero gradients
// right away) and records the order in which the parameters' gradients arrive. At the second
// iteration's forward, before anything is reduced, rank 0's arrival order is broadcast and
// every rank rebuilds its buckets along it (PyTorch's rebuild_buckets), parameters that got no
// gradient last; from then on the recorded unused set is applied at each forward without a
// walk. A parameter used several times in one forward (tied embeddings, a module called twice)
// needs nothing special: the engine sums all its uses before its AccumulateGrad runs, so it
// reports once per backward with all contributions. (Two backward passes over one forward
// still report twice and fail, as without static_graph.)

JoinRound join_round(ProcessGroup& group, Device device, bool active, bool grad_sync, int64_t timeout_ms) {
  const int world = group.size();
  Tensor flags = zeros({world + 1}, TensorOptions(kFloat32).device(device));
  if (active) {
    Tensor mine = native::narrow(flags, 0, group.rank(), 1);
    native::fill_(mine, 1.0);
    if (grad_sync) {
      Tensor sync = native::narrow(flags, 0, world, 1);
      native::fill_(sync, 1.0);
    }
  }
  group.all_reduce(flags, ReduceOp::SUM)->wait(timeout_ms);
  std::vector<float> v = native::to(flags, Device::cpu(), kFloat32).to_vector<float>();
  JoinRound round;
  for (int r = 0; r < world; ++r) {
    if (v[r] > 0.5f) {
      ++round.active;
      round.last_active_rank = r;
    }
  }
  round.sync = v[world] > 0.5f;
  return round;
}

void broadcast_tensors(ProcessGroup& group, const std::vector<Tensor>& tensors, int64_t timeout_ms, int root) {
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
    group.broadcast(flat, root)->wait(timeout_ms);
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
