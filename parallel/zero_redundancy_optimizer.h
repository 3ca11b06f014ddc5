// ZeroRedundancyOptimizer: PyTorch's sharded optimizer (ZeRO stage 1). The parameters are
// partitioned over the ranks of a process group; each rank builds the wrapped optimizer (Adam,
// SGD, ...) over its shard only, so it holds ~1/N of the optimizer state, steps its shard, and
// then every rank's updated parameters are broadcast from their owner. Gradients must already
// be the same on every rank (DistributedDataParallel, with or without gradient_as_bucket_view).
// consolidate_state_dict() gathers the whole state on one rank for a checkpoint; a
// consolidated state loads on any world size (each rank takes its new shard). Not thread-safe
// (one training loop per rank); every rank must call step / consolidate_state_dict together.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "nn/optim/optimizer.h"
#include "parallel/distributed/process_group.h"

namespace ember::parallel {

class ZeroRedundancyOptimizer {
 public:
  /// Builds the wrapped optimizer over one rank's parameters, e.g.
  /// [](std::vector<Tensor> p) { return std::make_unique<optim::Adam>(p, optim::AdamOptions(1e-3)); }
  using OptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

  /// Throws ValueError for no parameters, a null group or factory. Every rank passes the same
  /// parameters (shapes and order). See Note [ZeRO partition] for who owns what.
  ZeroRedundancyOptimizer(std::vector<Tensor> params, std::shared_ptr<ProcessGroup> group, OptimizerFactory factory,
                          int64_t timeout_ms = 5 * 60 * 1000);

  /// Steps this rank's shard, then broadcasts every shard from its owner (coalesced per rank
  /// and dtype). A collective.
  void step();
  void zero_grad(bool set_to_none = true);

  /// The rank that owns parameter i (its index in the constructor's list).
  int owner(size_t param_index) const { return owners_[param_index]; }
  const std::vector<Tensor>& params() const { return params_; }
  optim::Optimizer& local_optimizer() { return *local_; }

  /// Gathers every rank's optimizer state on `to_rank` (a collective: all ranks call it).
  /// Afterwards state_dict() on to_rank is the whole state, numbered by the constructor's
  /// parameter order, as one plain optimizer over all parameters would have it.
  void consolidate_state_dict(int to_rank = 0);
  /// On to_rank after consolidate_state_dict; throws Error elsewhere or before.
  const optim::OptimizerStateDict& state_dict() const;
  /// Takes this rank's shard of a consolidated state (from any world size; a plain optimizer's
  /// state_dict over the same parameters works as well). Not a collective.
  void load_state_dict(const optim::OptimizerStateDict& full);

 private:
  std::vector<Tensor> params_;
  std::shared_ptr<ProcessGroup> group_;
  int64_t timeout_ms_;
  std::vector<int> owners_;
  std::vector<size_t> local_indices_;  // global indices of this rank's shard, in order
  std::unique_ptr<optim::Optimizer> local_;
  std::optional<optim::OptimizerStateDict> consolidated_;
};

}  // namespace ember::parallel
