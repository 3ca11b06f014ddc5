// Reducer: DistributedDataParallel's gradient synchronization. Parameters are grouped into
// buckets in reverse registration order (the order backward produces their gradients); a
// post-accumulate-grad hook on every parameter marks it ready and, once a bucket is complete,
// launches that bucket's asynchronous all_reduce — in bucket order, the same on every rank — so
// communication overlaps the rest of backward: on the gradients themselves where the backend
// can (Note [Direct buckets]), else through the bucket's flat buffer. When the last bucket was
// launched the reducer waits for all of them, averages, and writes the results back into each
// parameter's .grad. See Note [DDP buckets] in reducer.cpp.
// Thread-safety: hooks run on autograd worker threads; all state is guarded by mu_.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "parallel/distributed/process_group.h"

namespace ember::parallel {

/// A bucket handed to a communication hook: its flat gradient buffer and its parameters.
struct GradBucket {
  size_t index = 0;
  Tensor buffer;                   // flat, contiguous, holds the local gradients (summed into)
  std::vector<size_t> parameter_indices;
};

/// Result of a communication hook: a Work that reduces the bucket, and an optional step run
/// after it completed (e.g. decompression) that must leave the SUM of all ranks in buffer.
struct CommHookResult {
  std::shared_ptr<Work> work;
  std::function<void()> then;
};
using CommHook = std::function<CommHookResult(ProcessGroup& group, GradBucket& bucket)>;

/// Built-in hooks: all_reduce in float16 / bfloat16 (half the bytes on the wire).
CommHook fp16_compress_hook();
CommHook bf16_compress_hook();

struct ReducerOptions {
  /// Ceiling on a bucket's bytes; small models get smaller buckets (Note [DDP buckets]).
  int64_t bucket_cap_bytes = 25ll * 1024 * 1024;
  int64_t first_bucket_cap_bytes = 1ll * 1024 * 1024;
  bool find_unused_parameters = false;
  /// PyTorch's gradient_as_bucket_view: see Note [Gradient as bucket view] in reducer.cpp.
  bool gradient_as_bucket_view = false;
  /// Bounds every wait on a bucket (DistributedError after it).
  int64_t timeout_ms = 5 * 60 * 1000;
};

class Reducer {
 public:
  /// A model with less than this many bucket caps of gradients is split into about this many
  /// buckets (see Note [DDP buckets]).
  static constexpr int64_t kMinBuckets = 4;
  /// `names[i]` names parameters[i] in error messages.
  Reducer(std::vector<Tensor> parameters, std::vector<std::string> names, std::shared_ptr<ProcessGroup> group,
          ReducerOptions options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  /// Called by DDP's forward when a backward with synchronization is expected. `used` lists the
  /// parameter indices reachable from the outputs (only with find_unused_parameters; others are
  /// marked ready at once with zero gradient). Throws DistributedError naming the parameters
  /// that got no gradient in the previous iteration when it did not finish.
  void prepare_for_backward(const std::vector<bool>* used);
  /// Whether hooks reduce (false inside no_sync()).
  void set_sync(bool sync) { sync_ = sync; }
  bool sync() const { return sync_; }
  void register_comm_hook(CommHook hook);
  /// Under DistributedDataParallel::join: the buckets are all_reduced with SUM and divided by
  /// `divisor` (the ranks that contributed, or the initial world size); 0 restores AVG over
  /// the world. Set by DDP's forward before the backward it prepares.
  void set_join_divisor(int divisor) { join_divisor_ = divisor; }
  /// For a rank that has joined: runs every bucket's reduction (the comm hook's, if any) on
  /// zeros, in bucket order, as the ranks still training do in their backward, and waits for
  /// them (Note [Join] in distributed_data_parallel.cpp).
  void shadow_all_reduce();
  /// Static graph (Note [Static graph]): record the order in which parameters report their
  /// gradients during the next backward...
  void record_arrival_order() {
    std::lock_guard<std::mutex> lk(mu_);
    arrival_order_.clear();
    record_arrival_ = true;
  }
  /// ...then rebuild the buckets in the order rank 0 recorded (a broadcast: every rank calls it
  /// at the same point, between iterations). Parameters that reported nothing go last.
  void rebuild_buckets_in_arrival_order();

  const std::vector<std::vector<size_t>>& bucket_parameter_indices() const { return bucket_params_; }
  /// Fraction of all_reduce time (launch to completion) that passed before backward ended, for
  /// the benchmark: averaged over buckets of the last finished iteration.
  double last_overlap_fraction() const { return last_overlap_; }
  /// Milliseconds the end of the last finished backward spent waiting for its buckets'
  /// all_reduce (the part of communication not hidden, plus waiting for slower ranks).
  double last_wait_ms() const { return last_wait_ms_; }
  /// How many buckets of the last finished backward were all_reduced in the .grad tensors
  /// themselves rather than through their flat buffers (Note [Direct buckets] in reducer.cpp).
  size_t last_direct_buckets() const { return last_direct_buckets_; }
  int rank() const { return group_->rank(); }

 private:
  struct Bucket {
    std::vector<size_t> params;
    std::vector<int64_t> offsets;  // element offsets in buffer
    int64_t numel = 0;              // of all its parameters
    Tensor buffer;                  // flat; made when first needed (ensure_buffer_locked)
    size_t pending = 0;
    bool launched = false;
    bool direct = false;        // reduced in the .grad tensors themselves (Note [Direct buckets])
    std::vector<Tensor> grads;  // those tensors while it runs
    CommHookResult result;
    std::chrono::steady_clock::time_point launch_time;
    // Set by the Work's completion callback (on the group's worker thread).
    std::shared_ptr<std::atomic<int64_t>> done_ns = std::make_shared<std::atomic<int64_t>>(0);
  };
  void on_grad_ready(size_t param_index);
  void mark_ready_locked(size_t param_index, bool zero);
  /// The bucket's .grad tensors when it can be reduced in them (Note [Direct buckets]), else {}.
  std::vector<Tensor> direct_grads_locked(size_t bucket_index) const;
  /// Allocates the bucket's flat buffer (zeros) unless it has one.
  void ensure_buffer_locked(Bucket& bucket);
  /// Copies the bucket's gradients (zeros for those marked or without one) into its buffer.
  void fill_buffer_locked(Bucket& bucket);
  void launch_ready_buckets_locked();
  void finalize_locked();
  /// Buckets over `order` (parameter indices), split by the caps (Note [DDP buckets]).
  void build_buckets(const std::vector<size_t>& order);
  /// "\n" + the group's debug report under EMBER_DISTRIBUTED_DEBUG, else "".
  std::string debug_report() const;
  /// Parameter i's place in its bucket, shaped like the parameter.
  Tensor bucket_view(size_t param_index) const;

  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::shared_ptr<ProcessGroup> group_;
  ReducerOptions options_;
  std::vector<std::vector<size_t>> bucket_params_;
  std::vector<size_t> param_bucket_;  // param -> bucket
  std::vector<size_t> param_pos_;     // param -> its position in its bucket
  std::vector<int> hook_ids_;

  mutable std::mutex mu_;
  std::vector<Bucket> buckets_;       // guarded by mu_
  std::vector<bool> ready_;           // guarded by mu_
  std::vector<bool> zero_;            // guarded by mu_: marked ready with a zero gradient
  size_t next_bucket_ = 0;            // guarded by mu_
  bool expect_backward_ = false;      // guarded by mu_
  bool sync_ = true;
  CommHook hook_;
  int join_divisor_ = 0;
  bool record_arrival_ = false;        // guarded by mu_
  std::vector<size_t> arrival_order_;  // guarded by mu_
  double last_overlap_ = 0.0;
  double last_wait_ms_ = 0.0;
  size_t last_direct_buckets_ = 0;
};

}  // namespace ember::parallel
