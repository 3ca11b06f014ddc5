#include "parallel/replicate.h"

#include <optional>
#include <unordered_map>

#include "core/profiler.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/ops/native.h"
#include "parallel/comm.h"
#include "parallel/deterministic_reducer.h"
#include "parallel/detail/comm_nccl.h"
#include "parallel/replicate_parameters.h"

// Note [Replica parameters]
// A replica is module.clone(devices[i]): its parameters are fresh leaves holding copies of the
// values. replicate then records BroadcastBackward nodes whose inputs are the original
// parameters (edges to their AccumulateGrad) and whose outputs are the replicas' parameters:
// set_history edits each replica parameter's AutogradMeta in place (requires_grad, grad_fn = the
// node, output_nr = its index), so the Tensor handles the replica's layers hold (the same
// TensorImpl) record history through it. Each replica's backward runs on its own device's
// engine thread, concurrently; a node runs once all of them have delivered its gradients, and
// sums the N gradients of each original parameter on the original's device and dtype, as
// PyTorch's Broadcast / ReduceAddCoalesced do.
// Note [Replica gradient sum per parameter]: there is one node per original parameter (outputs:
// that parameter's copy in each replica), except on the NCCL path below, which sums every
// parameter in one node to reduce whole buckets. A parameter's sum then runs as soon as every
// replica has produced its gradient, while the replicas still compute the earlier layers'
// gradients: the node was created in replicate(), before the forward, so it is the oldest ready
// node on its device and runs when that device's thread has nothing else ready (Note [Ready
// order] in autograd/engine.cpp), i.e. in the time the thread would wait for the slower replica.
// One node for everything summed all of a step's gradients after the last replica finished:
// 0.4 ms of one thread, the other idle, per step of ember-bench-dp's model.
// Note [Replica gradient sum]: the sum goes replica by replica in device-list order, so the
// result does not depend on which replica finished first. (One node per replica, summed in the
// engine's input buffer, added in arrival order: with 3 devices (a + b) + c and (a + c) + b
// round differently, and two identical models under DataParallel got gradients that differed in
// the last bits from the first steps on; see PackedLstmOnDevices.GradientsAreBitwiseReproducible.)
// With ReplicateOptions::exact_sum_divisor (DataParallel's deterministic option, Note
// [DataParallel shards] in data_parallel.cpp) the node sums exactly instead, so not even the
// grouping of replicas over devices shows in the bits.
// Across distinct GPUs holding the originals (all on one of them), where NCCL carries the
// copies (comm::detail::use_nccl and nccl_ready, Note [NCCL fallback]), the node sums with comm::reduce_add_coalesced instead: one
// NCCL reduce per flat bucket on the devices' current streams (Note [NCCL in comm]), in NCCL's
// order, which is fixed for a given device list and bucket size, so the result is still
// reproducible run to run. It takes that path only when every replica delivered every gradient
// in the originals' dtype; otherwise the per-parameter sum above.
// Note [Replica parameter broadcast]: across distinct GPUs where NCCL works (use_nccl,
// nccl_ready), with every parameter on one of them, the replicas' parameter values come from one
// comm::broadcast_coalesced (an NCCL broadcast per flat bucket on the devices' current streams,
// as PyTorch's replicate does through Broadcast) and clone() takes them
// (detail::ReplicaParametersGuard) instead of copying parameter by parameter; a replica's
// parameters are then views of its buckets, which nothing writes. The replica on the source
// device still gets its own copy from clone (see below). Elsewhere clone copies, as before.
// Parameters whose original does not require grad stay detached leaves. Under NoGradGuard the
// replicas are detached (PyTorch's replicate(detach=True)).
// Replica 0 is a copy too, even on the source device: reusing the original would make its
// parameters leaves there and the others non-leaves, and a replica that writes a buffer
// (e.g. running statistics) would write into the original module while others do not.
// On CPU logical devices, which share one memory, the replicas' parameters are not copies but
// aliases of the originals' memory and version counter (detail::ReplicaParametersGuard, share_cpu):
// replicas only read them, an in-place change of an original between forward and backward is
// still caught by the saved-tensor version check, and a step costs no parameter copies. The
// gradients BroadcastBackward takes from one CPU device to another are aliased the same
// way (they are fresh tensors nobody else holds). Buffers are copied.

namespace ember::parallel {
namespace {

struct GradTarget {
  Device device;
  DType dtype;
};

// Whether NCCL carries copies between `devices` from or to `root` (Note [NCCL fallback]).
bool nccl_carries(Device root, const std::vector<Device>& devices) {
  return comm::detail::use_nccl(devices, root, kFloat32) && comm::detail::nccl_ready(devices);
}

// BroadcastBackward's sum through comm::reduce_add_coalesced over NCCL (Note [Replica
// parameters]) for a node recorded where sum_over_nccl held, or nullopt where a replica's
// gradients do not fit that path. g is replica-major: replica i's gradients are
// g[i * per .. (i + 1) * per), on devices[i], output q of each replica feeding input
// output_input[q].
std::optional<autograd::TensorList> reduce_over_nccl(const std::vector<GradTarget>& targets,
                                                     const std::vector<size_t>& output_input,
                                                     const std::vector<Device>& devices, autograd::FunctionNode& n,
                                                     const autograd::TensorList& g) {
  const size_t replicas = devices.size();
  if (targets.empty() || replicas < 2 || output_input.size() % replicas != 0 || g.size() != output_input.size()) {
    return std::nullopt;
  }
  const Device dst = targets[0].device;  // every target's (sum_over_nccl)
  const size_t per = output_input.size() / replicas;
  std::vector<std::vector<Tensor>> lists(replicas);
  for (size_t i = 0; i < replicas; ++i) {
    for (size_t q = 0; q < per; ++q) {
      const Tensor& gi = g[i * per + q];
      const size_t k = output_input[i * per + q];
      if (k != output_input[q] || !gi.defined() || gi.device() != devices[i] || gi.dtype() != targets[k].dtype) {
        return std::nullopt;
      }
      lists[i].push_back(gi);
    }
  }
  std::vector<Tensor> sums = comm::reduce_add_coalesced(lists, dst);
  autograd::TensorList r(targets.size());
  for (size_t q = 0; q < per; ++q) {
    const size_t k = output_input[q];
    if (!n.needs_input_grad(k)) continue;
    r[k] = r[k].defined() ? native::add(r[k], sums[q]) : sums[q];  // a parameter tied after construction
  }
  return r;
}

// Note [Replica parameter broadcast]: per device, the broadcast copies of `originals` (empty
// maps where clone copies: the source device, or every device when the broadcast does not apply).
std::vector<detail::ParameterCopies> broadcast_parameters(const std::vector<Tensor>& originals,
                                                              const std::vector<Device>& devices) {
  std::vector<detail::ParameterCopies> copies(devices.size());
  if (originals.empty()) return copies;
  const Device src = originals[0].device();
  for (const Tensor& p : originals) {
    if (p.device() != src) return copies;
  }
  if (!nccl_carries(src, devices)) return copies;
  std::vector<std::vector<Tensor>> out = comm::broadcast_coalesced(originals, devices);
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] == src) continue;
    for (size_t j = 0; j < originals.size(); ++j) copies[i].emplace(originals[j].impl(), out[i][j]);
  }
  return copies;
}

// Whether BroadcastBackward may sum through NCCL (reduce_over_nccl): every original on one
// GPU, and NCCL carrying copies between `devices`. Decided when the graph is recorded, so the
// per-parameter nodes below are used wherever NCCL cannot be.
bool sum_over_nccl(const std::vector<GradTarget>& targets, const std::vector<Device>& devices) {
  if (targets.empty() || devices.size() < 2) return false;
  const Device dst = targets[0].device;
  for (const GradTarget& t : targets) {
    if (t.device != dst) return false;
  }
  return nccl_carries(dst, devices);
}

// Records a BroadcastBackward node whose inputs are `inputs` (originals, with their `targets`)
// and whose outputs are `outputs` (replica parameters, replica-major; output o feeds input
// output_input[o]); over_nccl: sum_over_nccl held for `targets`. Note [Replica parameters].
// exact_divisor: ReplicateOptions::exact_sum_divisor.
void record_broadcast_backward(std::vector<GradTarget> targets, std::vector<size_t> output_input,
                               const std::vector<Device>& devices, bool over_nccl, std::optional<double> exact_divisor,
                               const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
  auto node = std::make_shared<autograd::FunctionNode>(
      "BroadcastBackward", [targets = std::move(targets), output_input = std::move(output_input), devices, over_nccl,
                            exact_divisor](autograd::FunctionNode& n, autograd::TensorList& g) {
        if (over_nccl) {
          if (auto r = reduce_over_nccl(targets, output_input, devices, n, g)) return std::move(*r);
        }
        if (exact_divisor) {  // every output is one term of its input's exact sum
          std::vector<std::vector<Tensor>> terms(targets.size());
          for (size_t o = 0; o < output_input.size(); ++o) {
            const size_t k = output_input[o];
            const Tensor gi = o < g.size() ? g[o] : Tensor();
            const GradTarget& to = targets[k];
            terms[k].push_back(!gi.defined() ? gi
                               : gi.device().is_cpu() && to.device.is_cpu() && gi.dtype() == to.dtype
                                   ? detail::alias_on_cpu_device(gi, to.device)
                                   : native::to(gi, to.device, to.dtype));
          }
          autograd::TensorList r(targets.size());
          for (size_t k = 0; k < targets.size(); ++k) {
            if (!n.needs_input_grad(k)) continue;
            r[k] = detail::exact_sum(terms[k], static_cast<int64_t>(terms[k].size()), *exact_divisor, targets[k].device);
          }
          return r;
        }
        // Note [Replica gradient sum]: outputs are replica-major, so each input's gradient is
        // summed replica by replica, in device-list order.
        autograd::TensorList r(targets.size());
        for (size_t o = 0; o < output_input.size() && o < g.size(); ++o) {
          const size_t k = output_input[o];
          if (!n.needs_input_grad(k) || !g[o].defined()) continue;
          const GradTarget& to = targets[k];
          const Tensor& gi = g[o];
          Tensor here = gi.device().is_cpu() && to.device.is_cpu() && gi.dtype() == to.dtype
                            ? detail::alias_on_cpu_device(gi, to.device)
                            : native::to(gi, to.device, to.dtype);
          r[k] = r[k].defined() ? native::add(r[k], here) : here;
        }
        return r;
      });
  autograd::set_history(node, inputs, outputs);
}

}  // namespace

std::vector<std::shared_ptr<nn::Module>> replicate(const nn::Module& module, const std::vector<Device>& devices) {
  return replicate(module, devices, ReplicateOptions{});
}

std::vector<std::shared_ptr<nn::Module>> replicate(const nn::Module& module, const std::vector<Device>& devices,
                                                   const ReplicateOptions& options) {
  EMBER_PROFILE_SCOPE("DataParallel.replicate", kDataParallel);
  EMBER_CHECK_T(ValueError, !devices.empty(), "replicate: expected at least one device, got an empty list");
  const bool grad = autograd::GradMode::is_enabled();
  // Note [Replica parameters] with Note [Shared parameters] (nn/module.cpp): the node's inputs
  // are the original's distinct parameters; a clone's registration slots map to them slot by
  // slot, so a tensor tied in reset() (one tensor in the clone too) is one output, and a tie
  // made after construction (two tensors in the clone) is two outputs summed into one input.
  const nn::StateDict original_slots = module.named_parameters(true, /*remove_duplicate=*/false);
  std::vector<Tensor> originals = module.parameters();
  std::unordered_map<const TensorImpl*, size_t> original_index;
  for (size_t j = 0; j < originals.size(); ++j) original_index.emplace(originals[j].impl(), j);
  // The parameters that get a gradient: those whose original requires grad (under grad mode).
  std::vector<size_t> tracked;
  std::vector<int64_t> tracked_pos(originals.size(), -1);
  for (size_t j = 0; j < originals.size(); ++j) {
    if (grad && originals[j].requires_grad()) {
      tracked_pos[j] = static_cast<int64_t>(tracked.size());
      tracked.push_back(j);
    }
  }
  std::vector<std::shared_ptr<nn::Module>> replicas;
  replicas.reserve(devices.size());
  std::vector<Tensor> replica_params;  // replica-major, in slot order: the node's outputs
  std::vector<size_t> output_input;    // output o -> index into `tracked` (the node's input)
  const std::vector<detail::ParameterCopies> copies = broadcast_parameters(originals, devices);
  for (size_t d = 0; d < devices.size(); ++d) {
    const Device& device = devices[d];
    std::shared_ptr<nn::Module> replica;
    {
      // Note [Replica parameters] (CPU aliases) and Note [Replica parameter broadcast] (copies).
      detail::ReplicaParametersGuard given(&copies[d], /*share_cpu=*/true);
      replica = module.clone(device);
    }
    nn::StateDict slots = replica->named_parameters(true, /*remove_duplicate=*/false);
    EMBER_INTERNAL_ASSERT(slots.size() == original_slots.size(), "replicate: the clone of ", module.name(), " has ",
                          slots.size(), " parameter slots, the original ", original_slots.size());
    std::unordered_map<const TensorImpl*, size_t> seen;  // replica tensor -> its original's index
    for (size_t s = 0; s < slots.size(); ++s) {
      const size_t j = original_index.at(original_slots[s].second.impl());
      Tensor& p = slots[s].second;
      auto [it, fresh] = seen.emplace(p.impl(), j);
      EMBER_CHECK_T(ValueError, fresh || it->second == j, "replicate: the clone of ", module.name(), " ties ",
                    slots[s].first, " to another parameter, but the original does not (tie weights in reset() "
                    "or after construction, consistently)");
      if (!fresh) continue;
      if (p.requires_grad() && tracked_pos[j] < 0) p.requires_grad_(false);
      if (tracked_pos[j] >= 0) {
        replica_params.push_back(p);
        output_input.push_back(static_cast<size_t>(tracked_pos[j]));
      }
    }
    replicas.push_back(std::move(replica));
  }
  if (!tracked.empty()) {
    std::vector<GradTarget> targets;
    std::vector<const Tensor*> inputs;
    for (size_t j : tracked) {
      inputs.push_back(&originals[j]);
      targets.push_back({originals[j].device(), originals[j].dtype()});
    }
    if (!options.exact_sum_divisor && sum_over_nccl(targets, devices)) {
      std::vector<Tensor*> outputs;
      for (Tensor& p : replica_params) outputs.push_back(&p);
      record_broadcast_backward(std::move(targets), std::move(output_input), devices, /*over_nccl=*/true,
                                std::nullopt, inputs, outputs);
    } else {
      // Note [Replica gradient sum per parameter]: one node per original parameter.
      std::vector<std::vector<Tensor*>> outputs_of(tracked.size());
      for (size_t o = 0; o < replica_params.size(); ++o) outputs_of[output_input[o]].push_back(&replica_params[o]);
      for (size_t k = 0; k < tracked.size(); ++k) {
        record_broadcast_backward({targets[k]}, std::vector<size_t>(outputs_of[k].size(), 0), devices,
                                  /*over_nccl=*/false, options.exact_sum_divisor, {inputs[k]}, outputs_of[k]);
      }
    }
  }
  return replicas;
}

}  // namespace ember::parallel
