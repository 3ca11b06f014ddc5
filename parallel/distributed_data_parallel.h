// DistributedDataParallel<M>: one replica of the model per process (rank); gradients are
// averaged across ranks during backward by a bucketed, overlapped Reducer (parallel/reducer.h).
// At construction rank 0's parameters and buffers are broadcast to every rank; buffers are
// broadcast again before each forward (broadcast_buffers). no_sync() accumulates gradients
// locally; the next synchronized backward reduces the accumulated sums. Like PyTorch's DDP:
// every rank must run forward/backward the same number of times. Not thread-safe (one training
// loop per rank); the module is shared with the caller.
#pragma once
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "autograd/node.h"
#include "core/nested.h"
#include "nn/module.h"
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
};

namespace detail {
/// Broadcasts every tensor from rank 0 (in order; all ranks must pass the same shapes).
void broadcast_tensors(ProcessGroup& group, const std::vector<Tensor>& tensors, int64_t timeout_ms);
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
    reducer_ = std::make_unique<Reducer>(std::move(params), std::move(names), group_, ro);
  }

  /// Runs module->forward(args...) and prepares the reducer for the backward that follows.
  template <typename... Args>
  auto operator()(Args&&... args) {
    bool grad_sync = autograd::GradMode::is_enabled() && module_->is_training() && reducer_->sync();
    if (options_.broadcast_buffers && group_->size() > 1) {
      auto bufs = module_->buffers();
      if (!bufs.empty()) detail::broadcast_tensors(*group_, bufs, options_.timeout_ms);
    }
    if (grad_sync && !options_.find_unused_parameters) reducer_->prepare_for_backward(nullptr);
    auto out = module_->forward(std::forward<Args>(args)...);
    if (grad_sync && options_.find_unused_parameters) {
      // Every tensor of the output, however nested (core/nested.h).
      auto used = detail::reachable_parameters(flatten_tensors(out), params_);
      reducer_->prepare_for_backward(&used);
    }
    return out;
  }

  /// RAII: gradients accumulate locally while alive (torch's `with ddp.no_sync():`).
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp), prev_(ddp.reducer_->sync()) {
      ddp_.reducer_->set_sync(false);
    }
    ~NoSyncGuard() { ddp_.reducer_->set_sync(prev_); }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  void register_comm_hook(CommHook hook) { reducer_->register_comm_hook(std::move(hook)); }
  std::shared_ptr<M> module() const { return module_; }
  ProcessGroup& process_group() const { return *group_; }
  Reducer& reducer() { return *reducer_; }

 private:
  std::shared_ptr<M> module_;
  std::shared_ptr<ProcessGroup> group_;
  DistributedDataParallelOptions options_;
  std::vector<Tensor> params_;
  std::unique_ptr<Reducer> reducer_;
};

}  // namespace ember::parallel
