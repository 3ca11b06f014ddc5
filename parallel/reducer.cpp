#include "parallel/reducer.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>

#include "core/profiler.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

// Note [DDP buckets]
// Buckets are built once, at construction, walking the parameters in reverse registration
// order and closing a bucket when it would exceed its cap (the first bucket's cap is small so
// that communication starts early). bucket_cap_bytes is a ceiling: a model with fewer than
// kMinBuckets x cap bytes of gradients gets buckets of total / kMinBuckets (at least the first
// bucket's cap), so that a small model is not one bucket that can only go out once backward
// is over (ember-bench-ddp's 3.2 MB LSTM: 0.943-0.944 of ideal with two buckets, 0.949-0.956
// with six, bound to a core each). Without a comm hook the buckets are all_reduced with AVG,
// which the backends fold into their last reduction step; a hook returns the SUM and the
// reducer divides. Each rank builds identical buckets because every rank has
// the same model. A bucket is launched when all its parameters reported; buckets are launched
// strictly in index order (a ready bucket waits for its predecessors), so every rank issues the
// same sequence of all_reduce calls regardless of the order its hooks fired in. A parameter
// that gets no gradient keeps its bucket from launching: without find_unused_parameters that is
// detected at the next forward (prepare_for_backward) and reported with the parameter names;
// with it, DDP's forward marks unreachable parameters ready with zero gradient.

// Note [Direct buckets]
// Where the backend reduces a list of tensors as one in place (supports_all_reduce_coalesced:
// the tcp backend reads and writes them straight from its shared-memory all_reduce) and no comm
// hook, join or gradient_as_bucket_view is in play, a complete bucket is all_reduced (AVG) in
// its parameters' .grad tensors themselves: no copy into the flat buffer when a gradient is
// ready, no copy back (and no division) at the end of backward. On ember-bench-ddp's LSTM that
// was two passes over 3.2 MB per step on the training thread, most of what DDP added to a
// step. A bucket falls back to its flat buffer when one of its gradients is missing or marked
// unused (find_unused_parameters), is not a contiguous tensor of its parameter's dtype, device
// and size, or shares its memory with another parameter's gradient (one tensor set as two
// .grad: reduced in place it would be averaged twice); the two forms are the same collective
// (all_reduce_coalesced's contract), so ranks may choose differently for the same bucket. The
// gradients are final once their hook ran (DDP rejects a second one per iteration), and the
// all_reduce writes them in place as the copy back did, only earlier: a .grad read before
// backward returned may already hold the average. The flat buffer of a bucket is allocated
// when a bucket first needs it, so with direct buckets DDP keeps no second copy of the
// gradients (gradient_as_bucket_view's buffers are made at construction).

// Note [Gradient as bucket view]
// By default a parameter's gradient is copied into its bucket when it is ready and the
// averaged bucket is copied back into .grad at the end of backward. With
// gradient_as_bucket_view (PyTorch's option of that name) each .grad is instead set to a view
// of its place in the bucket: the average lands in .grad with no copy back, and the gradients
// take no memory besides the buckets. A gradient that AccumulateGrad summed into that view
// (zero_grad(set_to_none=false), or accumulation under no_sync()) is already in its bucket and
// is not copied in either. The cost is aliasing, as in PyTorch: the next synchronized backward
// overwrites the buckets, so a .grad tensor kept from an earlier iteration changes under its
// holder, and .grad must not be resized or given another dtype.

namespace ember::parallel {

namespace {
CommHookResult compress_hook(ProcessGroup& group, GradBucket& bucket, DType wire) {
  Tensor compressed = native::to(bucket.buffer, wire);
  auto work = group.all_reduce(compressed, ReduceOp::SUM);
  Tensor dst = bucket.buffer;
  return {work, [compressed, dst]() mutable { native::copy_(dst, compressed); }};
}
}  // namespace

CommHook fp16_compress_hook() {
  return [](ProcessGroup& g, GradBucket& b) { return compress_hook(g, b, kFloat16); };
}
CommHook bf16_compress_hook() {
  return [](ProcessGroup& g, GradBucket& b) { return compress_hook(g, b, kBFloat16); };
}

Reducer::Reducer(std::vector<Tensor> parameters, std::vector<std::string> names, std::shared_ptr<ProcessGroup> group,
                 ReducerOptions options)
    : params_(std::move(parameters)), names_(std::move(names)), group_(std::move(group)), options_(options) {
  EMBER_CHECK_T(ValueError, group_ != nullptr, "DistributedDataParallel: process_group is null");
  EMBER_CHECK_T(ValueError, !params_.empty(), "DistributedDataParallel: the module has no parameters that require grad");
  // Reverse registration order (the order backward usually produces gradients in).
  std::vector<size_t> order(params_.size());
  for (size_t k = 0; k < params_.size(); ++k) order[k] = params_.size() - 1 - k;
  build_buckets(order);
  ready_.assign(params_.size(), false);
  zero_.assign(params_.size(), false);
  for (size_t i = 0; i < params_.size(); ++i) {
    hook_ids_.push_back(params_[i].register_post_accumulate_grad_hook([this, i](const Tensor&) { on_grad_ready(i); }));
  }
}

void Reducer::build_buckets(const std::vector<size_t>& order) {
  // Walks `order`; splits on cap, dtype or device changes (Note [DDP buckets]).
  bucket_params_.clear();
  param_bucket_.assign(params_.size(), 0);
  int64_t total_bytes = 0;
  for (const Tensor& p : params_) total_bytes += static_cast<int64_t>(p.nbytes());
  const int64_t bucket_cap = std::min(
      options_.bucket_cap_bytes, std::max(options_.first_bucket_cap_bytes, total_bytes / kMinBuckets));
  std::vector<size_t> cur;
  int64_t cur_bytes = 0;
  auto close = [&] {
    if (cur.empty()) return;
    bucket_params_.push_back(cur);
    cur.clear();
    cur_bytes = 0;
  };
  for (size_t k : order) {
    const Tensor& p = params_[k];
    int64_t bytes = static_cast<int64_t>(p.nbytes());
    int64_t cap = bucket_params_.empty() ? std::min(options_.first_bucket_cap_bytes, bucket_cap) : bucket_cap;
    if (!cur.empty() && (cur_bytes + bytes > cap || params_[cur.back()].dtype() != p.dtype() ||
                         params_[cur.back()].device() != p.device())) {
      close();
    }
    cur.push_back(k);
    cur_bytes += bytes;
  }
  close();
  buckets_.clear();
  buckets_.resize(bucket_params_.size());
  param_pos_.assign(params_.size(), 0);
  for (size_t b = 0; b < bucket_params_.size(); ++b) {
    Bucket& bk = buckets_[b];
    bk.params = bucket_params_[b];
    int64_t off = 0;
    for (size_t i : bk.params) {
      param_bucket_[i] = b;
      param_pos_[i] = bk.offsets.size();
      bk.offsets.push_back(off);
      off += params_[i].numel();
    }
    bk.numel = off;
    // Note [Direct buckets]: a bucket that is always reduced in its .grad tensors never needs
    // its flat buffer, so it is made when first used (ensure_buffer_locked); the bucket views
    // of gradient_as_bucket_view need it now.
    if (options_.gradient_as_bucket_view) ensure_buffer_locked(bk);
  }
  if (options_.gradient_as_bucket_view) {
    // Gradients that exist already move into their buckets now (Note [Gradient as bucket view]).
    for (size_t i = 0; i < params_.size(); ++i) {
      Tensor g = params_[i].grad();
      if (!g.defined()) continue;
      Tensor view = bucket_view(i);
      native::copy_(view, g);
      params_[i].set_grad(view);
    }
  }
}

void Reducer::rebuild_buckets_in_arrival_order() {
  // Note [Static graph] in distributed_data_parallel.cpp: rank 0's arrival order for everyone.
  std::lock_guard<std::mutex> lk(mu_);
  if (expect_backward_) return;  // the last iteration did not finish: prepare_for_backward reports it
  const int64_t n = static_cast<int64_t>(params_.size());
  std::vector<int64_t> mine(params_.size(), -1);
  for (size_t k = 0; k < arrival_order_.size(); ++k) mine[k] = static_cast<int64_t>(arrival_order_[k]);
  Tensor order = from_vector(mine);
  const Device device = params_[0].device();
  if (order.device() != device) order = native::to(order, device);
  if (group_->size() > 1) group_->broadcast(order, 0)->wait(options_.timeout_ms);
  std::vector<int64_t> got = native::to(order, Device::cpu()).to_vector<int64_t>();
  std::vector<bool> placed(params_.size(), false);
  std::vector<size_t> rebuilt;
  for (int64_t v : got) {
    if (v < 0 || v >= n || placed[static_cast<size_t>(v)]) continue;
    placed[static_cast<size_t>(v)] = true;
    rebuilt.push_back(static_cast<size_t>(v));
  }
  for (size_t k = params_.size(); k-- > 0;) {  // parameters that got no gradient: at the end
    if (!placed[k]) rebuilt.push_back(k);
  }
  build_buckets(rebuilt);
  ready_.assign(params_.size(), false);
  zero_.assign(params_.size(), false);
  record_arrival_ = false;
}

Reducer::~Reducer() {
  for (size_t i = 0; i < params_.size(); ++i) params_[i].remove_post_accumulate_grad_hook(hook_ids_[i]);
  // Never leave collectives running on buffers we are about to free.
  for (auto& b : buckets_) {
    if (b.launched && b.result.work) {
      try {
        b.result.work->wait(options_.timeout_ms);
      } catch (...) {
      }
    }
  }
}

void Reducer::register_comm_hook(CommHook hook) {
  std::lock_guard<std::mutex> lk(mu_);
  EMBER_CHECK(!expect_backward_, "register_comm_hook: must be called before the first forward of an iteration");
  hook_ = std::move(hook);
}

void Reducer::prepare_for_backward(const std::vector<bool>* used) {
  std::lock_guard<std::mutex> lk(mu_);
  if (expect_backward_) {
    std::vector<std::string> missing;
    std::ostringstream idx;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!ready_[i]) {
        missing.push_back(names_[i]);
        idx << (missing.size() > 1 ? ", " : "") << i;
      }
    }
    std::ostringstream os;
    os << "DistributedDataParallel: expected to have finished reduction in the prior iteration before starting a new "
          "one. This error indicates that your module has parameters that were not used in producing loss (or that "
          "backward was not called). You can enable unused parameter detection by passing "
          "find_unused_parameters=true to DistributedDataParallel, or make sure all forward outputs participate in "
          "calculating loss. Parameter indices which did not receive grad for rank "
       << group_->rank() << ": " << idx.str() << ". Parameter names: ";
    for (size_t i = 0; i < missing.size(); ++i) os << (i ? ", " : "") << missing[i];
    // Leave the reducer clean so that a caller who handles this can keep going.
    for (auto& b : buckets_) {
      if (b.launched && b.result.work) {
        try {
          b.result.work->wait(options_.timeout_ms);
        } catch (...) {
        }
      }
    }
    expect_backward_ = false;
    EMBER_THROW(DistributedError, os.str());
  }
  for (auto& b : buckets_) {
    b.pending = b.params.size();
    b.launched = false;
    b.direct = false;
    b.grads.clear();
    b.result = {};
  }
  ready_.assign(params_.size(), false);
  zero_.assign(params_.size(), false);
  next_bucket_ = 0;
  expect_backward_ = true;
  if (used) {
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!(*used)[i]) mark_ready_locked(i, /*zero=*/true);
    }
    launch_ready_buckets_locked();
  }
}

void Reducer::on_grad_ready(size_t i) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!sync_ || !expect_backward_) return;  // no_sync(), or a backward DDP's forward did not prepare
  EMBER_CHECK(!ready_[i], "DistributedDataParallel: parameter ", names_[i], " (index ", i, ") on rank ",
              group_->rank(), " received a gradient twice in one iteration; DDP does not support reentrant backward "
              "or using a parameter in two separate backward passes per forward");
  if (record_arrival_) arrival_order_.push_back(i);
  mark_ready_locked(i, false);
  launch_ready_buckets_locked();
  if (next_bucket_ == buckets_.size()) finalize_locked();
}

Tensor Reducer::bucket_view(size_t i) const {
  const Bucket& b = buckets_[param_bucket_[i]];
  const Tensor& p = params_[i];
  return native::view(native::narrow(b.buffer, 0, b.offsets[param_pos_[i]], p.numel()), p.sizes());
}

void Reducer::mark_ready_locked(size_t i, bool zero) {
  ready_[i] = true;
  zero_[i] = zero;
  --buckets_[param_bucket_[i]].pending;
}

void Reducer::ensure_buffer_locked(Bucket& b) {
  if (b.buffer.defined()) return;
  const Tensor& p0 = params_[b.params[0]];
  b.buffer = zeros({b.numel}, TensorOptions(p0.dtype()).device(p0.device()));
}

void Reducer::fill_buffer_locked(Bucket& b) {
  ensure_buffer_locked(b);
  for (size_t i : b.params) {
    Tensor slot = native::narrow(b.buffer, 0, b.offsets[param_pos_[i]], params_[i].numel());
    Tensor g = params_[i].grad();
    if (zero_[i] || !g.defined()) {
      native::zero_(slot);
    } else if (!(options_.gradient_as_bucket_view && g.raw_data() == slot.raw_data() && g.is_contiguous() &&
                 g.dtype() == slot.dtype() && g.numel() == slot.numel())) {
      native::copy_(slot, native::reshape(g, {-1}));
    }  // else: AccumulateGrad summed into the bucket view itself (Note [Gradient as bucket view])
  }
}

std::vector<Tensor> Reducer::direct_grads_locked(size_t index) const {
  // See Note [Direct buckets].
  if (hook_ || join_divisor_ || options_.gradient_as_bucket_view || !group_->supports_all_reduce_coalesced()) return {};
  const Bucket& b = buckets_[index];
  std::vector<Tensor> grads;
  std::unordered_set<const void*> storages;  // of those gradients
  auto shared = [&](const Tensor& g) { return g.numel() > 0 && storages.count(g.storage().data()) > 0; };
  for (size_t i : b.params) {
    const Tensor& p = params_[i];
    Tensor g = p.grad();
    if (zero_[i] || !g.defined() || !g.is_contiguous() || g.dtype() != p.dtype() || g.device() != p.device() ||
        g.numel() != p.numel() || shared(g)) {
      return {};
    }
    if (g.numel() > 0) storages.insert(g.storage().data());
    grads.push_back(std::move(g));
  }
  // They are written in place while the other buckets may still read theirs: no other
  // parameter's gradient may share their memory.
  for (size_t j = 0; j < params_.size(); ++j) {
    if (param_bucket_[j] == index) continue;
    const Tensor g = params_[j].grad();
    if (g.defined() && shared(g)) return {};
  }
  return grads;
}

void Reducer::launch_ready_buckets_locked() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    Bucket& b = buckets_[next_bucket_];
    b.launch_time = std::chrono::steady_clock::now();
    b.grads = direct_grads_locked(next_bucket_);
    b.direct = !b.grads.empty();
    if (b.direct) {
      b.result = CommHookResult{group_->all_reduce_coalesced(b.grads, ReduceOp::AVG), nullptr};
    } else {
      fill_buffer_locked(b);
      GradBucket gb{next_bucket_, b.buffer, b.params};
      b.result = hook_ ? hook_(*group_, gb)
                       : CommHookResult{group_->all_reduce(b.buffer, join_divisor_ ? ReduceOp::SUM : ReduceOp::AVG),
                                        nullptr};
    }
    b.done_ns->store(0);
    b.result.work->add_callback([done = b.done_ns, span = profiler::AsyncSpan("DDP.bucket_all_reduce", next_bucket_,
                                                                              b.numel * element_size(params_[b.params[0]].dtype()))](Work&) {
      done->store(std::chrono::steady_clock::now().time_since_epoch().count());
      span.finish();
    });
    b.launched = true;
    ++next_bucket_;
  }
}

std::string Reducer::debug_report() const {
  // EMBER_DISTRIBUTED_DEBUG=INFO or DETAIL: the flight recorder (process_group_debug.h).
  std::string report;
  if (group_->debug_level() != DebugLevel::kOff) report.append("\n").append(group_->debug_report());
  return report;
}

void Reducer::shadow_all_reduce() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<CommHookResult> results;
  for (size_t index = 0; index < buckets_.size(); ++index) {
    Bucket& b = buckets_[index];
    ensure_buffer_locked(b);
    native::zero_(b.buffer);
    GradBucket gb{index, b.buffer, b.params};
    results.push_back(hook_ ? hook_(*group_, gb) : CommHookResult{group_->all_reduce(b.buffer, ReduceOp::SUM), nullptr});
  }
  for (auto& r : results) {
    r.work->wait(options_.timeout_ms);
    if (r.then) r.then();
  }
}

void Reducer::finalize_locked() {
  auto backward_end = std::chrono::steady_clock::now();
  double hidden = 0, total = 0;
  std::chrono::steady_clock::duration waited{};
  size_t direct = 0;
  const double inv = 1.0 / static_cast<double>(join_divisor_ ? join_divisor_ : group_->size());
  for (size_t index = 0; index < buckets_.size(); ++index) {
    Bucket& b = buckets_[index];
    const auto wait_start = std::chrono::steady_clock::now();
    try {
      EMBER_PROFILE_SCOPE("DDP.bucket_wait", kCommWait);
      b.result.work->wait(options_.timeout_ms);
    } catch (const TimeoutError& e) {
      expect_backward_ = false;
      EMBER_THROW(DistributedError, "DistributedDataParallel: rank ", group_->rank(), " waited ", options_.timeout_ms,
                  " ms for bucket ", index, "'s all_reduce: another rank stopped calling collectives (its loop "
                  "ended with fewer batches? wrap every rank's loop in ddp.join()): ", e.what(), debug_report());
    } catch (const DistributedError& e) {
      expect_backward_ = false;
      if (group_->debug_level() == DebugLevel::kOff) throw;
      EMBER_THROW(DistributedError, e.what(), debug_report());
    }
    waited += std::chrono::steady_clock::now() - wait_start;
    // Completion time from the Work's callback (it may run just after wait() returned).
    int64_t done_ns = b.done_ns->load();
    auto done = done_ns ? std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(done_ns))
                        : std::chrono::steady_clock::now();
    total += std::chrono::duration<double>(done - b.launch_time).count();
    hidden += std::chrono::duration<double>(std::min(done, backward_end) - b.launch_time).count();
    if (b.direct) {  // the average is in .grad already (Note [Direct buckets])
      b.grads.clear();
      ++direct;
      continue;
    }
    if (b.result.then) b.result.then();
    if (hook_ || join_divisor_) native::mul_(b.buffer, inv);  // hooks and join leave the sum; AVG divided
    for (size_t pos = 0; pos < b.params.size(); ++pos) {
      Tensor avg = bucket_view(b.params[pos]);
      Tensor& g = params_[b.params[pos]].mutable_grad();
      if (options_.gradient_as_bucket_view) {
        if (!g.defined() || g.raw_data() != avg.raw_data()) g = avg;  // Note [Gradient as bucket view]
      } else if (!g.defined()) {
        g = native::clone(avg);
      } else {
        native::copy_(g, avg);
      }
    }
  }
  last_overlap_ = total > 0 ? hidden / total : 0.0;
  last_direct_buckets_ = direct;
  last_wait_ms_ = std::chrono::duration<double, std::milli>(waited).count();
  expect_backward_ = false;
}

}  // namespace ember::parallel
