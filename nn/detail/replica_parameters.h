// ReplicaParametersGuard: DataParallel's replicate hands clone() the parameter copies it already
// made (one comm::broadcast_coalesced over NCCL) so clone does not copy each parameter again.
// See Note [Replica parameters] in parallel/replicate.cpp. The guard is thread-local state of the
// thread that clones; the map it points to must outlive it.
#pragma once
#include <unordered_map>

#include "core/tensor.h"

namespace ember::nn::detail {

/// Parameter copies by the TensorImpl of their original.
using ParameterCopies = std::unordered_map<const TensorImpl*, Tensor>;

/// While alive in a thread, clone(device) gives a parameter whose original has an entry in
/// `copies` on `device` that entry's memory (the clone's parameter is a fresh leaf over it; no
/// copy). Other parameters, entries on other devices, and all buffers are copied as usual.
/// A null `copies` changes nothing.
class ReplicaParametersGuard {
 public:
  explicit ReplicaParametersGuard(const ParameterCopies* copies);
  ~ReplicaParametersGuard();
  ReplicaParametersGuard(const ReplicaParametersGuard&) = delete;
  ReplicaParametersGuard& operator=(const ReplicaParametersGuard&) = delete;
  /// The copy of `original` on `device` the innermost guard holds, or nullptr.
  static const Tensor* find(const Tensor& original, Device device);

 private:
  const ParameterCopies* prev_;
};

}  // namespace ember::nn::detail
