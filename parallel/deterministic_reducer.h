// DeterministicReducer: DistributedDataParallel's gradient synchronization when its
// `deterministic` option is on (Note [World-size invariance] in deterministic_reducer.cpp).
// Every backward through DDP is one virtual shard of the global batch; its gradients are kept
// as they are until the synchronized backward of the step, whose end sums all shards of all
// ranks exactly (64-bit fixed point) and writes the mean over the job's shards into .grad. The
// result is the same bits for any world size and any assignment of shards to ranks.
// Thread-safety: hooks run on autograd worker threads; all state is guarded by mu_.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "parallel/distributed/process_group.h"

namespace ember::parallel {

struct DeterministicReducerOptions {
  /// Virtual shards per optimizer step over all ranks (a property of the job, not of the world
  /// size): the number of backward passes that the ranks run together between two synchronized
  /// backward ends, counting those under no_sync().
  int64_t num_shards = 0;
  bool find_unused_parameters = false;
  int64_t timeout_ms = 5 * 60 * 1000;
};

namespace detail {
/// The exact sum of `terms` divided by `divisor`, combined as the reducer combines shards (Note
/// [World-size invariance]): an exponent from the largest |element| and `num_terms` (>= the
/// defined terms), each term rounded on its own to int64 multiples of 2^-E, the integers added,
/// one conversion back. Undefined terms count as zeros (an undefined result when all are);
/// a NaN or Inf in any term makes every element NaN. Terms: one shape, float32/float64, all on
/// `device`, CPU or CUDA (TypeError / DeviceError otherwise). The bits do not depend on the
/// order of `terms`, nor on the device type.
Tensor exact_sum(const std::vector<Tensor>& terms, int64_t num_terms, double divisor, Device device);
}  // namespace detail

class DeterministicReducer {
 public:
  /// `names[i]` names parameters[i] in errors; `group` null: one process alone (world size 1),
  /// which sums its shards exactly as a group would. Parameters must be float32 or float64, all
  /// on one device, CPU or CUDA (TypeError / DeviceError otherwise); the step's two all_reduces
  /// run on that device's tensors. num_shards must be at least the world size and at most 2^20
  /// (ValueError).
  DeterministicReducer(std::vector<Tensor> parameters, std::vector<std::string> names,
                       std::shared_ptr<ProcessGroup> group, DeterministicReducerOptions options);
  ~DeterministicReducer();
  DeterministicReducer(const DeterministicReducer&) = delete;
  DeterministicReducer& operator=(const DeterministicReducer&) = delete;

  /// Called by DDP's forward before every backward (synchronized or not). `used`: with
  /// find_unused_parameters, the parameters reachable from the outputs. Throws DistributedError
  /// naming the parameters that got no gradient when the previous backward reported only some.
  void prepare_for_backward(const std::vector<bool>* used);
  /// Whether the end of the next backward reduces (false inside no_sync()).
  void set_sync(bool sync) { sync_ = sync; }
  bool sync() const { return sync_; }
  /// Shards this rank has kept since the last reduction.
  int64_t local_shards() const;
  int64_t num_shards() const { return options_.num_shards; }
  int world() const { return group_ ? group_->size() : 1; }
  /// Whether a shard of the current step has been prepared or kept since the last reduction
  /// (false at the start of a step: DDP's join rounds and buffer broadcasts run there).
  bool step_open() const;

  /// Inside DDP's join() (Note [Join in the deterministic mode] in deterministic_reducer.cpp): a
  /// step may hold fewer than num_shards shards (those of ranks that joined are missing, i.e.
  /// zero); the exact sum is divided by num_shards (divide_by_num_shards, DDP's
  /// divide_by_initial_world_size) or by the shards the step held. joining false: back to
  /// exactly num_shards per step.
  void set_join(bool joining, bool divide_by_num_shards);
  /// A joined rank's part of one step's reduction: the same two all_reduces, with zeros.
  void shadow_reduce();

 private:
  void on_grad_ready(size_t param_index);
  /// Moves this backward's gradients out of .grad into the kept shards.
  void capture_locked();
  /// The exact sum over every rank's kept shards, written to .grad (Note [World-size invariance]).
  void reduce_locked();

  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::shared_ptr<ProcessGroup> group_;
  DeterministicReducerOptions options_;
  Device device_;  // every parameter's; the reduction's buffers live there
  std::vector<int> hook_ids_;
  bool sync_ = true;

  mutable std::mutex mu_;
  bool expect_backward_ = false;           // guarded by mu_
  bool reduce_this_backward_ = false;      // guarded by mu_: sync_ when the backward was prepared
  std::vector<bool> expected_;             // guarded by mu_: parameters that will report
  std::vector<bool> ready_;                // guarded by mu_
  size_t pending_ = 0;                     // guarded by mu_: expected parameters yet to report
  std::vector<std::vector<Tensor>> kept_;  // guarded by mu_: per parameter, its shards' gradients
  int64_t local_shards_ = 0;               // guarded by mu_
  bool step_open_ = false;                 // guarded by mu_
  bool joining_ = false;                   // guarded by mu_
  bool join_divide_by_num_shards_ = true;  // guarded by mu_
};

}  // namespace ember::parallel
