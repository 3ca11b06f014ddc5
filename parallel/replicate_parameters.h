// DataParallel's replica parameter policy (Note [Replica parameters] in parallel/replicate.cpp),
// installed into nn::Module::clone through nn::detail::CloneParameterSourceGuard: on CPU logical
// devices a replica's parameters alias the original's memory; across GPUs they are the copies
// one broadcast already made. The guard is thread-local state of the thread that clones.
#pragma once
#include <unordered_map>

#include "core/tensor.h"
#include "nn/module.h"

namespace ember::parallel::detail {

/// Parameter copies by the TensorImpl of their original.
using ParameterCopies = std::unordered_map<const TensorImpl*, Tensor>;

/// A tensor on CPU device `device` over the same memory as CPU tensor `t` (same sizes, strides,
/// offset and version counter), with no autograd history. Keeps t's storage alive.
Tensor alias_on_cpu_device(const Tensor& t, Device device);

/// While alive in a thread, clone(device) gives each parameter:
/// - share_cpu, original and device both CPU: an alias of the original (alias_on_cpu_device);
///   replicas only read their parameters, and CPU logical devices share one memory;
/// - else the entry of `copies` (may be null) for the original when it is on `device`;
/// - else a copy, as without the guard. Buffers are always copied (a replica may write them).
class ReplicaParametersGuard {
 public:
  ReplicaParametersGuard(const ParameterCopies* copies, bool share_cpu);
  ReplicaParametersGuard(const ReplicaParametersGuard&) = delete;
  ReplicaParametersGuard& operator=(const ReplicaParametersGuard&) = delete;

 private:
  nn::detail::CloneParameterSource source_;
  nn::detail::CloneParameterSourceGuard guard_{&source_};
};

}  // namespace ember::parallel::detail
