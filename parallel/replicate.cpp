#include "parallel/replicate.h"

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/ops/native.h"

// Note [Replica parameters]
// A replica is module.clone(devices[i]): its parameters are fresh leaves holding copies of the
// values. replicate then records one BroadcastBackward node whose inputs are the original
// parameters (edges to their AccumulateGrad) and whose outputs are every replica's parameters:
// set_history edits each replica parameter's AutogradMeta in place (requires_grad, grad_fn = the
// node, output_nr = its index), so the Tensor handles the replica's layers hold (the same
// TensorImpl) record history through it. Each replica's backward runs on its own device's
// engine thread, concurrently; the node runs once all of them have delivered, and sums the N
// gradients of each original parameter on the original's device and dtype, as PyTorch's
// Broadcast / ReduceAddCoalesced do.
// Note [Replica gradient sum]: the sum goes replica by replica in device-list order, so the
// result does not depend on which replica finished first. (One node per replica, summed in the
// engine's input buffer, added in arrival order: with 3 devices (a + b) + c and (a + c) + b
// round differently, and two identical models under DataParallel got gradients that differed in
// the last bits from the first steps on; see PackedLstmOnDevices.GradientsAreBitwiseReproducible.)
// Parameters whose original does not require grad stay detached leaves. Under NoGradGuard the
// replicas are detached (PyTorch's replicate(detach=True)).
// Replica 0 is a copy too, even on the source device: reusing the original would make its
// parameters leaves there and the others non-leaves, and a replica that writes a buffer
// (e.g. running statistics) would write into the original module while others do not.
// On CPU logical devices, which share one memory, the replicas' parameters are not copies but
// aliases of the originals' memory and version counter (nn::detail::ShareCpuParametersGuard):
// replicas only read them, an in-place change of an original between forward and backward is
// still caught by the saved-tensor version check, and a step costs no parameter copies. The
// gradients BroadcastBackward takes from one CPU device to another are aliased the same
// way (they are fresh tensors nobody else holds). Buffers are copied.

namespace ember::parallel {

std::vector<std::shared_ptr<nn::Module>> replicate(const nn::Module& module, const std::vector<Device>& devices) {
  EMBER_CHECK_T(ValueError, !devices.empty(), "replicate: expected at least one device, got an empty list");
  const bool grad = autograd::GradMode::is_enabled();
  std::vector<Tensor> originals = module.parameters();
  // The parameters that get a gradient: those whose original requires grad (under grad mode).
  std::vector<size_t> tracked;
  for (size_t j = 0; j < originals.size(); ++j) {
    if (grad && originals[j].requires_grad()) tracked.push_back(j);
  }
  std::vector<std::shared_ptr<nn::Module>> replicas;
  replicas.reserve(devices.size());
  std::vector<Tensor> replica_params;  // replica-major: replica i's tracked parameter k at i * |tracked| + k
  for (const Device& device : devices) {
    std::shared_ptr<nn::Module> replica;
    {
      nn::detail::ShareCpuParametersGuard share;  // see Note [Replica parameters]
      replica = module.clone(device);
    }
    std::vector<Tensor> params = replica->parameters();
    EMBER_INTERNAL_ASSERT(params.size() == originals.size(), "replicate: the clone of ", module.name(), " has ",
                          params.size(), " parameters, the original ", originals.size());
    for (size_t j = 0; j < params.size(); ++j) {
      if (params[j].requires_grad() && !(grad && originals[j].requires_grad())) params[j].requires_grad_(false);
    }
    for (size_t j : tracked) replica_params.push_back(params[j]);
    replicas.push_back(std::move(replica));
  }
  if (!tracked.empty()) {
    struct Target {
      Device device;
      DType dtype;
    };
    std::vector<Target> targets;
    std::vector<const Tensor*> inputs;
    for (size_t j : tracked) {
      inputs.push_back(&originals[j]);
      targets.push_back({originals[j].device(), originals[j].dtype()});
    }
    std::vector<Tensor*> outputs;
    for (Tensor& p : replica_params) outputs.push_back(&p);
    const size_t num_replicas = devices.size();
    auto node = std::make_shared<autograd::FunctionNode>(
        "BroadcastBackward", [targets, num_replicas](autograd::FunctionNode& n, autograd::TensorList& g) {
          // Note [Replica gradient sum]: replica by replica, in device-list order.
          const size_t count = targets.size();
          autograd::TensorList r(count);
          for (size_t k = 0; k < count; ++k) {
            if (!n.needs_input_grad(k)) continue;
            const Target& to = targets[k];
            for (size_t i = 0; i < num_replicas; ++i) {
              const size_t slot = i * count + k;
              if (slot >= g.size() || !g[slot].defined()) continue;
              const Tensor& gi = g[slot];
              Tensor here = gi.device().is_cpu() && to.device.is_cpu() && gi.dtype() == to.dtype
                                ? nn::detail::alias_on_cpu_device(gi, to.device)
                                : native::to(gi, to.device, to.dtype);
              r[k] = r[k].defined() ? native::add(r[k], here) : here;
            }
          }
          return r;
        });
    autograd::set_history(node, inputs, outputs);
  }
  return replicas;
}

}  // namespace ember::parallel
