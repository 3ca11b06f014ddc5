#include "parallel/replicate.h"

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/ops/native.h"

// Note [Replica parameters]
// A replica is module.clone(devices[i]): its parameters are fresh leaves holding copies of the
// values. replicate then gives every replica one BroadcastBackward node whose inputs are the
// original parameters (edges to their AccumulateGrad) and whose outputs are that replica's
// parameters: set_history edits each replica parameter's AutogradMeta in place (requires_grad,
// grad_fn = the node, output_nr = its index), so the Tensor handles the replica's layers hold
// (the same TensorImpl) record history through it. The node's backward copies each incoming
// gradient to the original parameter's device and dtype. Because every replica has its own node
// on its own device, the engine runs them on the replicas' device threads concurrently, and it
// sums the N contributions to one original parameter in that AccumulateGrad's input buffer
// before running it once: .grad receives exactly the sum over replicas, as PyTorch's
// Broadcast/ReduceAddCoalesced give. Parameters whose original does not require grad stay
// detached leaves. Under NoGradGuard the replicas are detached (PyTorch's replicate(detach=True)).
// Replica 0 is a copy too, even on the source device: reusing the original would make its
// parameters leaves there and the others non-leaves, and a replica that writes a buffer
// (e.g. running statistics) would write into the original module while others do not.
// On CPU logical devices, which share one memory, the replicas' parameters are not copies but
// aliases of the originals' memory and version counter (nn::detail::ShareCpuParametersGuard):
// replicas only read them, an in-place change of an original between forward and backward is
// still caught by the saved-tensor version check, and a step costs no parameter copies. The
// gradients BroadcastBackward hands back from one CPU device to another are aliased the same
// way (they are fresh tensors nobody else holds). Buffers are copied.

namespace ember::parallel {

std::vector<std::shared_ptr<nn::Module>> replicate(const nn::Module& module, const std::vector<Device>& devices) {
  EMBER_CHECK_T(ValueError, !devices.empty(), "replicate: expected at least one device, got an empty list");
  const bool grad = autograd::GradMode::is_enabled();
  std::vector<Tensor> originals = module.parameters();
  std::vector<std::shared_ptr<nn::Module>> replicas;
  replicas.reserve(devices.size());
  for (const Device& device : devices) {
    std::shared_ptr<nn::Module> replica;
    {
      nn::detail::ShareCpuParametersGuard share;  // see Note [Replica parameters]
      replica = module.clone(device);
    }
    std::vector<Tensor> params = replica->parameters();
    EMBER_INTERNAL_ASSERT(params.size() == originals.size(), "replicate: the clone of ", module.name(), " has ",
                          params.size(), " parameters, the original ", originals.size());
    std::vector<const Tensor*> inputs;
    std::vector<Tensor*> outputs;
    struct Target {
      Device device;
      DType dtype;
    };
    std::vector<Target> targets;
    for (size_t j = 0; j < params.size(); ++j) {
      if (!params[j].requires_grad()) continue;
      if (!grad || !originals[j].requires_grad()) {
        params[j].requires_grad_(false);
        continue;
      }
      inputs.push_back(&originals[j]);
      outputs.push_back(&params[j]);
      targets.push_back({originals[j].device(), originals[j].dtype()});
    }
    if (!outputs.empty()) {
      auto node = std::make_shared<autograd::FunctionNode>(
          "BroadcastBackward", [targets](autograd::FunctionNode& n, autograd::TensorList& g) {
            autograd::TensorList r(targets.size());
            for (size_t j = 0; j < targets.size() && j < g.size(); ++j) {
              if (!g[j].defined() || !n.needs_input_grad(j)) continue;
              const Target& to = targets[j];
              r[j] = g[j].device().is_cpu() && to.device.is_cpu() && g[j].dtype() == to.dtype
                         ? nn::detail::alias_on_cpu_device(g[j], to.device)
                         : native::to(g[j], to.device, to.dtype);
            }
            return r;
          });
      autograd::set_history(node, inputs, outputs);
    }
    replicas.push_back(std::move(replica));
  }
  return replicas;
}

}  // namespace ember::parallel
