#include "parallel/deterministic_reducer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/ops/factory.h"
#include "core/ops/fixed_point.h"
#include "core/ops/native.h"

// Note [World-size invariance]
// Goal: the same bits after a training step whether the global batch ran in 1 process, over N
// ranks, or over any other split, for any world size that divides the shards unevenly too
// (3 ranks over 8 shards), and after a resume at another world size.
//  * The global batch is cut into num_shards virtual shards, fixed by the job's configuration.
//    Each shard runs as its own forward and backward (one DDP forward per shard; a rank with
//    several runs all but the last under no_sync()). So a shard's gradient comes from the same
//    samples, shapes and kernels whoever computes it; the kernels only need to give the same
//    bits for any thread count (fixed split sizes, never split counts: docs/DETERMINISM.md
//    lists what the examples run), and per-sample randomness comes from the sample's global
//    index and the seed, never from the rank (rnn_dp's dropout masks).
//  * The end of each backward moves the gradients out of .grad into this rank's kept shards,
//    untouched. The synchronized backward's end then combines all shards of all ranks exactly:
//    per parameter, the largest |g| over this rank's shards; one small all_reduce (MAX, float64)
//    makes it global; from it and num_shards one exponent E per parameter (Note [Fixed-point
//    gradient sums] in core/kernels/fixed_point.h); each shard's gradient is rounded on its own
//    to int64 multiples of 2^-E and summed into one flat int64 buffer (plus one slot counting
//    shards), and one all_reduce (SUM, int64) adds the ranks' buffers. Integer sums do not
//    depend on the order or grouping, so every rank, at every world size, holds the same
//    integers, and converts them once: .grad = (sum * 2^-E) / num_shards, the mean of the shard
//    gradients (as DDP's AVG is the mean of the ranks'). Communication: one all_reduce of
//    8 bytes per gradient element (twice float32's) and one of 8 bytes per parameter tensor.
//  * The shard count slot must come out equal to num_shards (every rank sees the same sum, so
//    all throw ValueError alike, before .grad is written); E assumes at most num_shards terms.
//  * A parameter whose gradient holds NaN or Inf on any shard of any rank gets a .grad of NaN
//    (every element), on every rank: a GradScaler skips the step, clip_grad_norm_ sees it.
//  * Not promised: the same bits as the default (non-deterministic) mode, which sums floats in
//    an order set by buckets, ring position and world size; nor across another ISA, BLAS build
//    or device type (docs/DETERMINISM.md).

// Note [Join in the deterministic mode]
// Uneven inputs (DistributedDataParallel::join) work in the mode because a rank that has joined
// can only add zeros: its shards are missing from the exact integer sum, which is the sum of the
// shards that ran, whichever ranks ran them. The rounds of Note [Join] (distributed_data_parallel
// .cpp) are held once per step, at its first forward (a rank runs several shards per step, and
// ranks run different numbers of them, so a round per forward would pair one rank's first shard
// with another's second); a joined rank answers each round with zeros and, while some rank is
// active, runs this reducer's two all_reduces of the step with zeros (shadow_reduce: a MAX over
// per-parameter zeros, a SUM over a zero int64 buffer of the same length). The shard count may
// then come out below num_shards; the mean divides by num_shards (PyTorch's
// divide_by_initial_world_size: a missing shard counts as a zero gradient) or by the shards the
// step held. So the result of a step depends only on which shards ran in it, never on which
// ranks held them, nor on how many ranks had joined: 2 ranks over 8 shards whose second rank
// runs out after k steps give the same bits as 4 ranks whose last two do.

namespace ember::parallel {

namespace detail {
Tensor exact_sum(const std::vector<Tensor>& terms, int64_t num_terms, double divisor, Device device) {
  const Tensor* first = nullptr;
  double max_abs = 0.0;
  for (const Tensor& t : terms) {
    if (!t.defined()) continue;
    EMBER_CHECK_T(DeviceError, t.device() == device, "exact_sum: a term is on ", t.device().str(),
                  "; expected every term on ", device.str());
    if (first == nullptr) first = &t;
    EMBER_CHECK_T(ValueError, t.sizes() == first->sizes() && t.dtype() == first->dtype(), "exact_sum: terms of shape ",
                  first->sizes(), " ", first->dtype(), " and ", t.sizes(), " ", t.dtype(), "; expected one shape and dtype");
    max_abs = std::max(max_abs, native::fixed_point_max_abs(t));
  }
  if (first == nullptr) return Tensor();
  Tensor out = empty(first->sizes(), TensorOptions(first->dtype()).device(device));
  if (!std::isfinite(max_abs)) {
    native::fill_(out, std::numeric_limits<double>::quiet_NaN());
    return out;
  }
  const int exponent = native::fixed_point_exponent(max_abs, num_terms);
  Tensor acc = zeros({first->numel()}, TensorOptions(kInt64).device(device));
  for (const Tensor& t : terms) {
    if (t.defined()) native::fixed_point_accumulate_(acc, t, exponent);
  }
  native::fixed_point_to_float_(out, acc, exponent, divisor);
  return out;
}
}  // namespace detail

DeterministicReducer::DeterministicReducer(std::vector<Tensor> parameters, std::vector<std::string> names,
                                           std::shared_ptr<ProcessGroup> group, DeterministicReducerOptions options)
    : params_(std::move(parameters)), names_(std::move(names)), group_(std::move(group)), options_(options) {
  EMBER_CHECK_T(ValueError, !params_.empty(),
                "DistributedDataParallel(deterministic): the module has no parameters that require grad");
  device_ = params_[0].device();
  EMBER_CHECK_T(ValueError, options_.num_shards >= world() && options_.num_shards <= (int64_t{1} << 20),
                "DistributedDataParallel(deterministic): num_shards must be between the world size (", world(), ") and 2^20, got ", options_.num_shards,
                "; it is the job's number of virtual shards per step, the same at every world size");
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    EMBER_CHECK_T(TypeError, p.dtype() == kFloat32 || p.dtype() == kFloat64, "DistributedDataParallel(deterministic): ",
                  "parameter ", names_[i], " is ", p.dtype(), "; the exact gradient sum takes float32 or float64");
    EMBER_CHECK_T(DeviceError, p.device() == device_, "DistributedDataParallel(deterministic): parameter ",
                  names_[i], " is on ", p.device().str(), " and ", names_[0], " on ", device_.str(),
                  "; the exact gradient sum takes a module on one device");
  }
  kept_.resize(params_.size());
  expected_.assign(params_.size(), true);
  ready_.assign(params_.size(), false);
  for (size_t i = 0; i < params_.size(); ++i) {
    hook_ids_.push_back(params_[i].register_post_accumulate_grad_hook([this, i](const Tensor&) { on_grad_ready(i); }));
  }
}

DeterministicReducer::~DeterministicReducer() {
  for (size_t i = 0; i < params_.size(); ++i) params_[i].remove_post_accumulate_grad_hook(hook_ids_[i]);
}

int64_t DeterministicReducer::local_shards() const {
  std::lock_guard<std::mutex> lk(mu_);
  return local_shards_;
}

bool DeterministicReducer::step_open() const {
  std::lock_guard<std::mutex> lk(mu_);
  return step_open_;
}

void DeterministicReducer::set_join(bool joining, bool divide_by_num_shards) {
  std::lock_guard<std::mutex> lk(mu_);
  joining_ = joining;
  join_divide_by_num_shards_ = divide_by_num_shards;
}

void DeterministicReducer::shadow_reduce() {
  std::lock_guard<std::mutex> lk(mu_);
  if (world() == 1) return;
  const size_t n = params_.size();
  int64_t total = 0;
  for (const Tensor& p : params_) total += p.numel();
  Tensor maxes = zeros({static_cast<int64_t>(n)}, TensorOptions(kFloat64).device(device_));
  group_->all_reduce(maxes, ReduceOp::MAX)->wait(options_.timeout_ms);
  Tensor acc = zeros({total + 1}, TensorOptions(kInt64).device(device_));
  group_->all_reduce(acc, ReduceOp::SUM)->wait(options_.timeout_ms);
}

void DeterministicReducer::prepare_for_backward(const std::vector<bool>* used) {
  std::lock_guard<std::mutex> lk(mu_);
  const size_t expected_count = [&] {
    size_t n = 0;
    for (bool e : expected_) n += e ? 1 : 0;
    return n;
  }();
  if (expect_backward_ && pending_ > 0 && pending_ < expected_count) {
    std::ostringstream os;
    os << "DistributedDataParallel(deterministic): the previous backward on rank " << (group_ ? group_->rank() : 0)
       << " reported gradients for some parameters but not for: ";
    bool first = true;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (expected_[i] && !ready_[i]) {
        os << (first ? "" : ", ") << names_[i];
        first = false;
      }
    }
    os << ". Pass find_unused_parameters=true, or make every parameter take part in the loss";
    expect_backward_ = false;
    EMBER_THROW(DistributedError, os.str());
  }
  // A forward whose backward never ran (pending_ == expected_count) is simply dropped.
  if (used != nullptr) {
    EMBER_CHECK_T(ValueError, used->size() == params_.size(), "DistributedDataParallel(deterministic): ",
                  used->size(), " used flags for ", params_.size(), " parameters");
    expected_ = *used;
  } else {
    expected_.assign(params_.size(), true);
  }
  ready_.assign(params_.size(), false);
  pending_ = 0;
  for (bool e : expected_) pending_ += e ? 1 : 0;
  reduce_this_backward_ = sync_;
  expect_backward_ = true;
  step_open_ = true;
  if (pending_ == 0) {  // nothing reachable: the shard's gradient is zero
    ++local_shards_;
    if (reduce_this_backward_) reduce_locked();
    expect_backward_ = false;
  }
}

void DeterministicReducer::on_grad_ready(size_t i) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!expect_backward_) return;  // a backward DDP's forward did not prepare: not a shard
  EMBER_CHECK_T(DistributedError, expected_[i] && !ready_[i], "DistributedDataParallel(deterministic): parameter ",
                names_[i], expected_[i] ? " reported its gradient twice in one backward"
                                        : " got a gradient but was found unused by find_unused_parameters");
  ready_[i] = true;
  if (--pending_ > 0) return;
  capture_locked();
  if (reduce_this_backward_) reduce_locked();
  expect_backward_ = false;
}

void DeterministicReducer::capture_locked() {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!ready_[i]) continue;
    Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    kept_[i].push_back(g);
    params_[i].set_grad(Tensor());  // the next shard's backward starts from nothing
  }
  ++local_shards_;
}

void DeterministicReducer::reduce_locked() {
  const size_t n = params_.size();
  const int64_t timeout = options_.timeout_ms;
  // 1. The largest |g| per parameter over every shard of every rank (+Inf: a NaN/Inf somewhere).
  std::vector<double> local_max(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (const Tensor& g : kept_[i]) local_max[i] = std::max(local_max[i], native::fixed_point_max_abs(g));
  }
  Tensor maxes = native::to(from_vector(local_max, {static_cast<int64_t>(n)}), device_);
  if (world() > 1) group_->all_reduce(maxes, ReduceOp::MAX)->wait(timeout);
  const std::vector<double> global_max = native::to(maxes, Device::cpu()).to_vector<double>();
  // 2. This rank's shards as one flat int64 buffer, every parameter at its own exponent, plus
  //    the shard count; 3. one all_reduce adds the ranks' integers.
  std::vector<int64_t> offset(n + 1, 0);
  for (size_t i = 0; i < n; ++i) offset[i + 1] = offset[i] + params_[i].numel();
  Tensor acc = zeros({offset[n] + 1}, TensorOptions(kInt64).device(device_));
  std::vector<int> exponent(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(global_max[i])) continue;
    exponent[i] = native::fixed_point_exponent(global_max[i], options_.num_shards);
    Tensor slot = native::narrow(acc, 0, offset[i], params_[i].numel());
    for (const Tensor& g : kept_[i]) native::fixed_point_accumulate_(slot, g, exponent[i]);
  }
  Tensor count_slot = native::narrow(acc, 0, offset[n], 1);
  native::fill_(count_slot, static_cast<double>(local_shards_));
  for (auto& k : kept_) k.clear();
  local_shards_ = 0;
  step_open_ = false;
  if (world() > 1) group_->all_reduce(acc, ReduceOp::SUM)->wait(timeout);
  const int64_t shards = native::to(native::narrow(acc, 0, offset[n], 1), Device::cpu()).to_vector<int64_t>()[0];
  // Note [Join in the deterministic mode]: inside join a step may hold fewer shards.
  const bool count_ok = shards == options_.num_shards || (joining_ && shards >= 1 && shards < options_.num_shards);
  EMBER_CHECK_T(ValueError, count_ok, "DistributedDataParallel(deterministic): the ranks ran ", shards,
                " shard backward passes in this step, but num_shards is ", options_.num_shards,
                "; every step must run exactly num_shards forward/backward passes over all ranks together "
                "(all but each rank's last under no_sync()), or at most that many inside join()");
  // 4. Back to floating point, once: the mean over the job's shards.
  const int64_t divisor = joining_ && !join_divide_by_num_shards_ ? shards : options_.num_shards;
  for (size_t i = 0; i < n; ++i) {
    Tensor g = empty(params_[i].sizes(), TensorOptions(params_[i].dtype()).device(device_));
    if (std::isfinite(global_max[i])) {
      native::fixed_point_to_float_(g, native::narrow(acc, 0, offset[i], params_[i].numel()), exponent[i],
                                    static_cast<double>(divisor));
    } else {
      native::fill_(g, std::numeric_limits<double>::quiet_NaN());
    }
    params_[i].set_grad(g);
  }
}

}  // namespace ember::parallel
