// replicate: the per-device copies of a module that DataParallel runs. Each replica is a deep
// copy (Cloneable::clone(device), values copied, nothing re-initialized) whose parameters are
// then made outputs of a BroadcastBackward node, so gradients computed on a replica flow back
// to (and are summed into) the original parameters' .grad. Buffers are copied without history.
// See Note [Replica parameters] in replicate.cpp. Thread-safe for distinct source modules.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "nn/module.h"

namespace ember::parallel {

/// One replica of `module` per device, replica i on devices[i] (every replica is a copy, also
/// on the module's own device). With grad mode on, each replica parameter whose original
/// requires grad is a non-leaf whose gradient goes to the original parameter; with grad mode
/// off (NoGradGuard) the replicas' parameters do not require grad. Throws NotImplementedError
/// for modules without clone() (derive from nn::Cloneable<M>).
std::vector<std::shared_ptr<nn::Module>> replicate(const nn::Module& module, const std::vector<Device>& devices);

/// How the replicas' gradients of a parameter are combined into the original's.
struct ReplicateOptions {
  /// Unset: summed replica by replica in device-list order (Note [Replica gradient sum]). Set:
  /// the exact sum (detail::exact_sum in parallel/deterministic_reducer.h, the same bits in any
  /// order or grouping) divided by this value; CPU parameters only. DataParallel's deterministic
  /// option, where every replica is one shard.
  std::optional<double> exact_sum_divisor;
};
std::vector<std::shared_ptr<nn::Module>> replicate(const nn::Module& module, const std::vector<Device>& devices,
                                                   const ReplicateOptions& options);

/// Typed form: M must be the type clone() returns (the Derived of Cloneable<Derived>).
template <class M>
std::vector<std::shared_ptr<M>> replicate(const std::shared_ptr<M>& module, const std::vector<Device>& devices,
                                         const ReplicateOptions& options = {}) {
  EMBER_CHECK_T(ValueError, module != nullptr, "replicate: the module is null");
  std::vector<std::shared_ptr<M>> out;
  for (auto& r : replicate(static_cast<const nn::Module&>(*module), devices, options)) {
    auto typed = std::dynamic_pointer_cast<M>(r);
    EMBER_CHECK_T(TypeError, typed != nullptr, "replicate: ", module->name(),
                  "::clone() returned a module of another type; derive it from nn::Cloneable<", module->name(), ">");
    out.push_back(std::move(typed));
  }
  return out;
}

}  // namespace ember::parallel
