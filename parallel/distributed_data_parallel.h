// DistributedDataParallel<M>: one replica of the model per process (rank); gradients are
// averaged across ranks during backward by a bucketed, overlapped Reducer (parallel/reducer.h).
// At construction rank 0's parameters and buffers are broadcast to every rank; buffers are
// broadcast again before each forward (broadcast_buffers). no_sync() accumulates gradients
// locally; the next synchronized backward reduces the accumulated sums. Like PyTorch's DDP:
// every rank must run forward/backward the same number of times, unless the loops run inside
// join() (uneven inputs, Note [Join]). Not thread-safe (one training
// loop per rank); the module is shared with the caller.
#pragma once
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "autograd/node.h"
#include "core/nested.h"
#include "nn/module.h"
#include "parallel/deterministic_reducer.h"
#include "parallel/reducer.h"

namespace ember::parallel {

struct DistributedDataParallelOptions {
  double bucket_cap_mb = 25.0;
  bool find_unused_parameters = false;
  bool broadcast_buffers = true;
  /// .grad tensors become views into the communication buckets: one copy of the gradients
  /// less per step, at the cost of aliasing (Note [Gradient as bucket view] in reducer.cpp).
  bool gradient_as_bucket_view = false;
  int64_t timeout_ms = 5 * 60 * 1000;
  /// The set of parameters that get gradients is the same every iteration (Note [Static
  /// graph]): found once in the first iteration, then unused ones are skipped without
  /// find_unused_parameters' per-step graph walk, and the buckets are rebuilt in the order
  /// gradients arrived (rank 0's) at the second iteration.
  bool static_graph = false;
  /// World-size-invariant gradients (Note [World-size invariance] in deterministic_reducer.cpp):
  /// every forward/backward is one of num_shards virtual shards of the step's global batch, and
  /// the synchronized backward's end writes the exact mean of all shards' gradients, the same
  /// bits at any world size. bucket_cap_mb, gradient_as_bucket_view, static_graph and comm
  /// hooks do not apply (register_comm_hook throws ValueError); join() works (Note [Join in the
  /// deterministic mode]); buffers are broadcast at the first forward of each step.
  bool deterministic = false;
  /// Under `deterministic`: the job's virtual shards per step, over all ranks (>= world size).
  int64_t num_shards = 0;
};

/// Options of DistributedDataParallel::join (PyTorch's Join / ddp.join()).
struct JoinOptions {
  /// true (PyTorch's default): gradients summed over the ranks still training are divided by
  /// the world size, so a rank that joined counts as a zero gradient. false: divided by the
  /// number of ranks that contributed this iteration (their average).
  bool divide_by_initial_world_size = true;
};

namespace detail {
/// Broadcasts every tensor from `root` (in order; all ranks must pass the same shapes).
void broadcast_tensors(ProcessGroup& group, const std::vector<Tensor>& tensors, int64_t timeout_ms, int root = 0);

/// One round of Note [Join]: what every rank said before an iteration.
struct JoinRound {
  int active = 0;             // ranks still training
  int last_active_rank = -1;  // the highest of them: buffers come from it
  bool sync = false;          // whether they reduce gradients in this iteration's backward
};
/// All-reduces one small tensor on `device`: rank r marks itself active, and whether it syncs.
JoinRound join_round(ProcessGroup& group, Device device, bool active, bool grad_sync, int64_t timeout_ms);
/// Marks which `params` are reachable from the autograd graph of `outputs`.
std::vector<bool> reachable_parameters(const std::vector<Tensor>& outputs, const std::vector<Tensor>& params);

}  // namespace detail

template <class M>
class DistributedDataParallel {
 public:
  DistributedDataParallel(std::shared_ptr<M> module, std::shared_ptr<ProcessGroup> group,
                          DistributedDataParallelOptions options = {})
      : module_(std::move(module)), group_(std::move(group)), options_(options) {
    EMBER_CHECK_T(ValueError, module_ != nullptr, "DistributedDataParallel: module is null");
    EMBER_CHECK_T(ValueError, group_ != nullptr, "DistributedDataParallel: process_group is null");
    std::vector<Tensor> params;
    std::vector<std::string> names;
    for (auto& [name, p] : module_->named_parameters()) {
      if (p.requires_grad()) {
        params.push_back(p);
        names.push_back(name);
      }
    }
    // Rank 0's state everywhere (PyTorch's _sync_module_states).
    std::vector<Tensor> state = module_->parameters();
    for (auto& b : module_->buffers()) state.push_back(b);
    detail::broadcast_tensors(*group_, state, options_.timeout_ms);
    ReducerOptions ro;
    ro.bucket_cap_bytes = static_cast<int64_t>(options_.bucket_cap_mb * 1024 * 1024);
    ro.find_unused_parameters = options_.find_unused_parameters;
    ro.gradient_as_bucket_view = options_.gradient_as_bucket_view;
    ro.timeout_ms = options_.timeout_ms;
    params_ = params;
    device_ = params.empty() ? Device::cpu() : params[0].device();
    if (options_.deterministic) {
      deterministic_ = std::make_unique<DeterministicReducer>(
          std::move(params), std::move(names), group_,
          DeterministicReducerOptions{options_.num_shards, options_.find_unused_parameters, options_.timeout_ms});
      return;
    }
    reducer_ = std::make_unique<Reducer>(std::move(params), std::move(names), group_, ro);
  }

  /// Runs module->forward(args...) and prepares the reducer for the backward that follows.
  template <typename... Args>
  auto operator()(Args&&... args) {
    if (deterministic_) return deterministic_forward(std::forward<Args>(args)...);
    bool grad_sync = autograd::GradMode::is_enabled() && module_->is_training() && reducer_->sync();
    int buffer_root = 0;
    if (joining_) {  // Note [Join] in distributed_data_parallel.cpp
      detail::JoinRound round = detail::join_round(*group_, device_, true, grad_sync, options_.timeout_ms);
      last_joiner_ = round.last_active_rank;
      buffer_root = round.last_active_rank;
      reducer_->set_join_divisor(join_options_.divide_by_initial_world_size ? group_->size() : round.active);
    }
    if (options_.broadcast_buffers && group_->size() > 1) {
      auto bufs = module_->buffers();
      if (!bufs.empty()) detail::broadcast_tensors(*group_, bufs, options_.timeout_ms, buffer_root);
    }
    const bool first_static = grad_sync && options_.static_graph && static_iterations_ == 0;
    if (grad_sync && options_.static_graph && !first_static) {  // Note [Static graph]
      if (static_iterations_ == 1) reducer_->rebuild_buckets_in_arrival_order();
      reducer_->prepare_for_backward(&static_used_);
    } else if (grad_sync && !options_.static_graph && !options_.find_unused_parameters) {
      reducer_->prepare_for_backward(nullptr);
    }
    if (first_static) reducer_->record_arrival_order();
    auto out = module_->forward(std::forward<Args>(args)...);
    if (first_static || (grad_sync && !options_.static_graph && options_.find_unused_parameters)) {
      // Every tensor of the output, however nested (core/nested.h).
      auto used = detail::reachable_parameters(flatten_tensors(out), params_);
      reducer_->prepare_for_backward(&used);
      if (first_static) static_used_ = std::move(used);
    }
    if (grad_sync && options_.static_graph) ++static_iterations_;
    return out;
  }

  /// RAII: gradients accumulate locally while alive (torch's `with ddp.no_sync():`).
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp), prev_(ddp.sync()) { ddp_.set_sync(false); }
    ~NoSyncGuard() { ddp_.set_sync(prev_); }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  /// Runs this rank's training loop `fn()` for inputs of uneven length (PyTorch's ddp.join()):
  /// every rank calls join. Once this rank's loop has returned, it shadows the collectives of
  /// the ranks still training (zeros into their gradient all_reduces, their buffer broadcasts)
  /// until every rank has joined; then all ranks take the parameters and buffers of the last
  /// rank to join. See Note [Join]. Without join, a rank that runs out of batches leaves the
  /// others in a collective until the process group's timeout (a DistributedError naming it).
  template <class Fn>
  void join(Fn&& fn, JoinOptions options = {}) {
    EMBER_CHECK_T(ValueError, !joining_, "DistributedDataParallel::join: already inside join()");
    joining_ = true;
    join_options_ = options;
    last_joiner_ = -1;
    struct Reset {
      DistributedDataParallel* ddp;
      ~Reset() {
        ddp->joining_ = false;
        if (ddp->reducer_) ddp->reducer_->set_join_divisor(0);
        if (ddp->deterministic_) ddp->deterministic_->set_join(false, true);
      }
    } reset{this};
    if (deterministic_) deterministic_->set_join(true, options.divide_by_initial_world_size);
    fn();
    if (group_->size() == 1) return;
    while (true) {
      detail::JoinRound round = detail::join_round(*group_, device_, false, false, options_.timeout_ms);
      if (round.active == 0) break;
      last_joiner_ = round.last_active_rank;
      if (options_.broadcast_buffers) {
        auto bufs = module_->buffers();
        if (!bufs.empty()) detail::broadcast_tensors(*group_, bufs, options_.timeout_ms, round.last_active_rank);
      }
      if (round.sync) deterministic_ ? deterministic_->shadow_reduce() : reducer_->shadow_all_reduce();
    }
    if (last_joiner_ >= 0) {
      std::vector<Tensor> state = module_->parameters();
      for (auto& b : module_->buffers()) state.push_back(b);
      detail::broadcast_tensors(*group_, state, options_.timeout_ms, last_joiner_);
    }
  }
  /// The rank whose model every rank took at the end of the last join() (-1: none needed).
  int last_joiner() const { return last_joiner_; }

  void register_comm_hook(CommHook hook) {
    EMBER_CHECK_T(ValueError, !deterministic_, "DistributedDataParallel::register_comm_hook: not available with the "
                  "deterministic option (the gradients are summed exactly in fixed point)");
    reducer_->register_comm_hook(std::move(hook));
  }
  std::shared_ptr<M> module() const { return module_; }
  ProcessGroup& process_group() const { return *group_; }
  Reducer& reducer() {
    EMBER_CHECK_T(ValueError, reducer_ != nullptr, "DistributedDataParallel::reducer: the deterministic option uses "
                  "deterministic_reducer()");
    return *reducer_;
  }
  /// Under the deterministic option; null otherwise.
  DeterministicReducer* deterministic_reducer() { return deterministic_.get(); }

 private:
  bool sync() const { return deterministic_ ? deterministic_->sync() : reducer_->sync(); }
  void set_sync(bool sync) { deterministic_ ? deterministic_->set_sync(sync) : reducer_->set_sync(sync); }
  template <typename... Args>
  auto deterministic_forward(Args&&... args) {
    const bool grad = autograd::GradMode::is_enabled() && module_->is_training();
    // Ranks run different numbers of shards per step: the collectives of a forward are held at
    // each step's first one only (Note [Join in the deterministic mode]).
    const bool step_start = grad && !deterministic_->step_open();
    int buffer_root = 0;
    if (joining_ && step_start) {
      detail::JoinRound round = detail::join_round(*group_, device_, true, true, options_.timeout_ms);
      last_joiner_ = round.last_active_rank;
      buffer_root = round.last_active_rank;
    }
    if (options_.broadcast_buffers && group_->size() > 1 && step_start) {
      auto bufs = module_->buffers();
      if (!bufs.empty()) detail::broadcast_tensors(*group_, bufs, options_.timeout_ms, buffer_root);
    }
    if (grad && !options_.find_unused_parameters) deterministic_->prepare_for_backward(nullptr);
    auto out = module_->forward(std::forward<Args>(args)...);
    if (grad && options_.find_unused_parameters) {
      auto used = detail::reachable_parameters(flatten_tensors(out), params_);
      deterministic_->prepare_for_backward(&used);
    }
    return out;
  }

  std::shared_ptr<M> module_;
  std::shared_ptr<ProcessGroup> group_;
  DistributedDataParallelOptions options_;
  std::vector<Tensor> params_;
  Device device_ = Device::cpu();
  std::unique_ptr<Reducer> reducer_;
  std::unique_ptr<DeterministicReducer> deterministic_;  // instead of reducer_ under options_.deterministic
  int64_t static_iterations_ = 0;  // synchronized iterations run with static_graph
  std::vector<bool> static_used_;  // which params_ the first of them reached
  bool joining_ = false;
  JoinOptions join_options_;
  int last_joiner_ = -1;
};

}  // namespace ember::parallel
