#include "nn/detail/replica_parameters.h"

namespace ember::nn::detail {
namespace {
thread_local const ParameterCopies* t_copies = nullptr;
}  // namespace

ReplicaParametersGuard::ReplicaParametersGuard(const ParameterCopies* copies) : prev_(t_copies) {
  if (copies != nullptr) t_copies = copies;
}
ReplicaParametersGuard::~ReplicaParametersGuard() { t_copies = prev_; }

const Tensor* ReplicaParametersGuard::find(const Tensor& original, Device device) {
  if (t_copies == nullptr) return nullptr;
  auto it = t_copies->find(original.impl());
  return it != t_copies->end() && it->second.defined() && it->second.device() == device ? &it->second : nullptr;
}

}  // namespace ember::nn::detail
