#include "parallel/distributed/process_group.h"

#include <chrono>
#include <sstream>

#include "core/error.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "parallel/distributed/store.h"
#include "parallel/distributed/detail/reduce_kernels.h"

namespace ember::parallel {

const char* op_type_name(OpType type) {
  switch (type) {
    case OpType::ALL_REDUCE: return "all_reduce";
    case OpType::BROADCAST: return "broadcast";
    case OpType::REDUCE: return "reduce";
    case OpType::ALL_GATHER: return "all_gather";
    case OpType::REDUCE_SCATTER: return "reduce_scatter";
    case OpType::BARRIER: return "barrier";
    case OpType::SEND: return "send";
    case OpType::RECV: return "recv";
  }
  return "?";
}

ProcessGroup::ProcessGroup(int rank, int size) : rank_(rank), size_(size) {
  EMBER_CHECK_T(ValueError, size >= 1, "ProcessGroup: world_size must be >= 1, got ", size);
  EMBER_CHECK_T(ValueError, rank >= 0 && rank < size, "ProcessGroup: rank must be in [0, ", size,
                "), got ", rank);
  debug_level_ = debug_level_from_env();
}

void ProcessGroup::set_debug_level(DebugLevel level) {
  std::lock_guard<std::mutex> lock(call_mutex_);
  debug_level_ = level;
}

void ProcessGroup::set_debug_store(std::shared_ptr<Store> store) {
  std::lock_guard<std::mutex> lock(debug_mutex_);
  debug_store_ = std::move(store);
}

namespace {
std::string last_collective_key(int rank) { return "ember_debug/last_collective/" + std::to_string(rank); }
}  // namespace

std::string ProcessGroup::debug_report(int64_t store_timeout_ms) const {
  std::string out = recorder_.dump(rank_);
  std::shared_ptr<Store> store;
  {
    std::lock_guard<std::mutex> lock(debug_mutex_);
    store = debug_store_;
  }
  if (!store) return out;
  out += "\nlast collective each rank entered:";
  for (int r = 0; r < size_; ++r) {
    std::string what = "nothing recorded";
    try {
      auto v = store->get(last_collective_key(r), store_timeout_ms);
      what = std::string(v.begin(), v.end());
    } catch (const std::exception&) {
    }
    out += "\n  rank " + std::to_string(r) + ": " + what;
  }
  return out;
}

void ProcessGroup::verify_fingerprint(const CollectiveFingerprint& fp, Device device, bool desync) {
  // Note [Desync check] (process_group_debug.cpp).
  const std::vector<int64_t> mine = fp.encode();
  const int64_t n = CollectiveFingerprint::kLength;
  Tensor input = from_vector(mine);
  if (device != input.device()) input = native::to(input, device);
  std::vector<Tensor> outputs;
  for (int r = 0; r < size_; ++r) outputs.push_back(zeros({n}, TensorOptions(kInt64).device(device)));
  OpInfo info;
  info.type = OpType::ALL_GATHER;
  info.seq = static_cast<uint64_t>(fp.seq);
  info.description = who() + ": " + (desync ? "desync" : "argument") + " check before " + fp.str();
  try {
    all_gather_impl(info, outputs, input)->wait(debug_timeout_ms_);
  } catch (const Error& e) {
    EMBER_THROW(DistributedError, e.what(), "\n", debug_report());
  }
  std::vector<CollectiveFingerprint> all;
  bool same = true;
  for (int r = 0; r < size_; ++r) {
    std::vector<int64_t> v = native::to(outputs[r], Device::cpu()).to_vector<int64_t>();
    all.push_back(CollectiveFingerprint::decode(v.data()));
    same = same && all.back() == fp;
  }
  if (same) return;
  std::ostringstream os;
  os << who() << ": " << (desync ? "desync detected (EMBER_DISTRIBUTED_DEBUG=DETAIL)" : "argument mismatch")
     << ": the ranks called different collectives: ";
  for (int r = 0; r < size_; ++r) os << (r ? "; " : "") << "rank " << r << " called " << all[r].str();
  os << "\n" << recorder_.dump(rank_);
  EMBER_THROW(DistributedError, os.str());
}

// Note [Argument check]: every rank of a collective must pass the same root, sizes, dtype
// and op. tcp compares them in the headers that open every collective. MPI and NCCL do not
// for rooted collectives: mismatched broadcast roots both return (the ranks then disagree in
// silence) and mismatched reduce roots hang until a timeout. So for the collectives a
// backend does not check itself (checks_arguments), the ranks first all-gather their
// fingerprints, the desync check's machinery, and all fail with a DistributedError naming
// each rank's call (the group stays usable: nothing ran). It costs one small all_gather per
// rooted collective on mpi and nccl; DETAIL runs it before every collective.
std::shared_ptr<Work> ProcessGroup::run_collective(const CollectiveFingerprint& fp, const std::vector<Tensor>& tensors,
                                                   const std::function<std::shared_ptr<Work>()>& launch) {
  if (!tensors.empty()) last_device_ = tensors.front().device();
  // Entered: recorded (and published) before the desync check, which may be where it waits.
  auto entry = recorder_.enter(static_cast<uint64_t>(fp.seq), fp.str());
  std::shared_ptr<Store> store;
  {
    std::lock_guard<std::mutex> lock(debug_mutex_);
    store = debug_store_;
  }
  if (store) {
    try {
      store->set(last_collective_key(rank_), fp.str());
    } catch (const std::exception&) {
      // The record is a debugging aid: a store that went away must not fail the collective.
    }
  }
  const auto type = static_cast<OpType>(fp.op);
  const bool detail = debug_level_ == DebugLevel::kDetail;
  if ((detail || !checks_arguments(type)) && size_ > 1) {
    try {
      verify_fingerprint(fp, last_device_, /*desync=*/detail);
    } catch (...) {
      entry->failed.store(true);
      entry->duration_us.store(
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - entry->start).count());
      throw;
    }
  }
  std::shared_ptr<Work> work = launch();
  work->add_callback([entry](Work& w) {
    entry->failed.store(!w.is_success());
    entry->duration_us.store(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - entry->start).count());
  });
  return work;
}

ProcessGroup::~ProcessGroup() = default;

std::string ProcessGroup::who() const {
  return backend_name() + " rank " + std::to_string(rank_) + "/" + std::to_string(size_);
}

OpInfo ProcessGroup::make_info(OpType type, const std::vector<Tensor>& tensors) {
  OpInfo info;
  info.type = type;
  const bool p2p = type == OpType::SEND || type == OpType::RECV;
  info.seq = p2p ? ++p2p_seq_ : ++collective_seq_;
  std::ostringstream os;
  os << who() << ": " << op_type_name(type) << " #" << info.seq;
  if (!tensors.empty()) {
    int64_t numel = 0;
    for (const auto& t : tensors) numel += t.numel();
    os << " (" << tensors.front().dtype() << ", " << numel << " element" << (numel == 1 ? "" : "s");
    if (tensors.size() > 1) os << " in " << tensors.size() << " tensors";
    os << ")";
  }
  info.description = os.str();
  return info;
}

void ProcessGroup::check_tensor(const std::string& op, const Tensor& t, const char* what) const {
  EMBER_CHECK_T(ValueError, t.defined(), who(), ": ", op, ": ", what, " is an undefined Tensor");
  EMBER_CHECK_T(TypeError, detail::is_reducible_dtype(t.dtype()), who(), ": ", op, ": ", what,
                " has dtype ", t.dtype(),
                "; expected float32, float64, int64, int32, bfloat16 or float16");
  EMBER_CHECK_T(ValueError, t.is_contiguous(), who(), ": ", op, ": ", what,
                " must be contiguous (sizes ", t.sizes(), ", strides ", t.strides(),
                "); call contiguous() and copy the result back");
  check_device(op, t);
}

void ProcessGroup::check_rank_arg(const std::string& op, int r, const char* what, bool allow_self) const {
  EMBER_CHECK_T(ValueError, r >= 0 && r < size_, who(), ": ", op, ": ", what, " must be in [0, ",
                size_, "), got ", r);
  EMBER_CHECK_T(ValueError, allow_self || r != rank_, who(), ": ", op, ": ", what,
                " must be another rank, got this rank (", r, ")");
}

namespace {
void check_same_dtype(const std::string& who, const std::string& op, const std::vector<Tensor>& ts,
                      DType dtype) {
  for (size_t i = 0; i < ts.size(); ++i)
    EMBER_CHECK_T(TypeError, ts[i].dtype() == dtype, who, ": ", op, ": tensor ", i, " has dtype ",
                  ts[i].dtype(), " but tensor 0 has ", dtype);
}
}  // namespace

std::shared_ptr<Work> ProcessGroup::all_reduce(std::vector<Tensor> tensors, ReduceOp op) {
  EMBER_CHECK_T(ValueError, !tensors.empty(), who(), ": all_reduce: expected at least one tensor");
  for (const auto& t : tensors) check_tensor("all_reduce", t, "tensor");
  for (auto& t : tensors) t.bump_version();
  std::lock_guard<std::mutex> lock(call_mutex_);
  OpInfo info = make_info(OpType::ALL_REDUCE, tensors);
  auto fp = CollectiveFingerprint::make(info.type, info.seq, tensors, -1, static_cast<int>(op));
  return run_collective(fp, tensors, [&] { return all_reduce_impl(info, tensors, op); });
}

std::shared_ptr<Work> ProcessGroup::all_reduce(const Tensor& tensor, ReduceOp op) {
  return all_reduce(std::vector<Tensor>{tensor}, op);
}

std::shared_ptr<Work> ProcessGroup::all_reduce_coalesced(std::vector<Tensor> tensors, ReduceOp op) {
  EMBER_CHECK_T(ValueError, supports_all_reduce_coalesced(), who(),
                ": all_reduce_coalesced: not supported by this backend (use all_reduce on one flat tensor)");
  EMBER_CHECK_T(ValueError, !tensors.empty(), who(), ": all_reduce_coalesced: expected at least one tensor");
  for (const auto& t : tensors) check_tensor("all_reduce_coalesced", t, "tensor");
  check_same_dtype(who(), "all_reduce_coalesced", tensors, tensors.front().dtype());
  for (size_t i = 1; i < tensors.size(); ++i)
    EMBER_CHECK_T(ValueError, tensors[i].device() == tensors.front().device(), who(),
                  ": all_reduce_coalesced: tensor ", i, " is on ", tensors[i].device(), " but tensor 0 on ",
                  tensors.front().device());
  for (auto& t : tensors) t.bump_version();
  std::lock_guard<std::mutex> lock(call_mutex_);
  OpInfo info = make_info(OpType::ALL_REDUCE, tensors);
  // The fingerprint of the one flat tensor it is equivalent to (see the header).
  auto fp = CollectiveFingerprint::make(info.type, info.seq, tensors, -1, static_cast<int>(op));
  fp.num_tensors = 1;
  fp.ndim = 1;
  fp.dims = {fp.numel};
  return run_collective(fp, tensors, [&] { return all_reduce_coalesced_impl(info, tensors, op); });
}

std::shared_ptr<Work> ProcessGroup::all_reduce_coalesced_impl(const OpInfo& info, std::vector<Tensor>, ReduceOp) {
  EMBER_THROW(ValueError, info.description, ": all_reduce_coalesced is not supported by the ", backend_name(),
              " backend");
}

std::shared_ptr<Work> ProcessGroup::broadcast(std::vector<Tensor> tensors, int root) {
  EMBER_CHECK_T(ValueError, !tensors.empty(), who(), ": broadcast: expected at least one tensor");
  check_rank_arg("broadcast", root, "root", true);
  for (const auto& t : tensors) check_tensor("broadcast", t, "tensor");
  if (root != rank_)
    for (auto& t : tensors) t.bump_version();
  std::lock_guard<std::mutex> lock(call_mutex_);
  OpInfo info = make_info(OpType::BROADCAST, tensors);
  auto fp = CollectiveFingerprint::make(info.type, info.seq, tensors, root);
  return run_collective(fp, tensors, [&] { return broadcast_impl(info, tensors, root); });
}

std::shared_ptr<Work> ProcessGroup::broadcast(const Tensor& tensor, int root) {
  return broadcast(std::vector<Tensor>{tensor}, root);
}

std::shared_ptr<Work> ProcessGroup::reduce(std::vector<Tensor> tensors, int root, ReduceOp op) {
  EMBER_CHECK_T(ValueError, !tensors.empty(), who(), ": reduce: expected at least one tensor");
  check_rank_arg("reduce", root, "root", true);
  for (const auto& t : tensors) check_tensor("reduce", t, "tensor");
  if (root == rank_)
    for (auto& t : tensors) t.bump_version();
  std::lock_guard<std::mutex> lock(call_mutex_);
  OpInfo info = make_info(OpType::REDUCE, tensors);
  auto fp = CollectiveFingerprint::make(info.type, info.seq, tensors, root, static_cast<int>(op));
  return run_collective(fp, tensors, [&] { return reduce_impl(info, tensors, root, op); });
}

std::shared_ptr<Work> ProcessGroup::reduce(const Tensor& tensor, int root, ReduceOp op) {
  return reduce(std::vector<Tensor>{tensor}, root, op);
}

void ProcessGroup::check_per_rank(const std::string& op, const std::vector<Tensor>& per_rank, const char* per_rank_what,
                                  const Tensor& one, const char* one_what) const {
  check_tensor(op, one, one_what);
  EMBER_CHECK_T(ValueError, static_cast<int>(per_rank.size()) == size_, who(), ": ", op, ": expected one ",
                per_rank_what, " tensor per rank (", size_, "), got ", per_rank.size());
  for (const auto& t : per_rank) {
    check_tensor(op, t, per_rank_what);
    EMBER_CHECK_T(TypeError, t.dtype() == one.dtype(), who(), ": ", op, ": ", per_rank_what, " has dtype ",
                  t.dtype(), " but ", one_what, " has ", one.dtype());
    EMBER_CHECK_T(ValueError, t.numel() == one.numel(), who(), ": ", op, ": ", per_rank_what, " has ", t.numel(),
                  " elements but ", one_what, " has ", one.numel());
  }
}

std::shared_ptr<Work> ProcessGroup::all_gather(std::vector<Tensor> outputs, const Tensor& input) {
  check_per_rank("all_gather", outputs, "output", input, "input");
  for (auto& t : outputs) t.bump_version();
  std::lock_guard<std::mutex> lock(call_mutex_);
  OpInfo info = make_info(OpType::ALL_GATHER, {input});
  auto fp = CollectiveFingerprint::make(info.type, info.seq, {input});
  return run_collective(fp, {input}, [&] { return all_gather_impl(info, outputs, input); });
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(const Tensor& output, std::vector<Tensor> inputs,
                                                   ReduceOp op) {
  check_per_rank("reduce_scatter", inputs, "input", output, "output");
  output.bump_version();
  std::lock_guard<std::mutex> lock(call_mutex_);
  OpInfo info = make_info(OpType::REDUCE_SCATTER, {output});
  auto fp = CollectiveFingerprint::make(info.type, info.seq, {output}, -1, static_cast<int>(op));
  return run_collective(fp, {output}, [&] { return reduce_scatter_impl(info, output, inputs, op); });
}

std::shared_ptr<Work> ProcessGroup::barrier() {
  std::lock_guard<std::mutex> lock(call_mutex_);
  OpInfo info = make_info(OpType::BARRIER, {});
  auto fp = CollectiveFingerprint::make(info.type, info.seq, {});
  return run_collective(fp, {}, [&] { return barrier_impl(info); });
}

void ProcessGroup::check_p2p(const std::string& op, const std::vector<Tensor>& tensors, int peer,
                             const char* peer_what) const {
  EMBER_CHECK_T(ValueError, !tensors.empty(), who(), ": ", op, ": expected at least one tensor");
  check_rank_arg(op, peer, peer_what, false);
  for (const auto& t : tensors) check_tensor(op, t, "tensor");
  check_same_dtype(who(), op, tensors, tensors.front().dtype());
}

OpInfo ProcessGroup::make_p2p_info(OpType type, const std::vector<Tensor>& tensors, const char* to_or_from, int peer,
                                   int tag) {
  OpInfo info = make_info(type, tensors);
  info.description += to_or_from + std::to_string(peer) + " tag " + std::to_string(tag);
  return info;
}

std::shared_ptr<Work> ProcessGroup::send(std::vector<Tensor> tensors, int dst, int tag) {
  check_p2p("send", tensors, dst, "dst");
  std::lock_guard<std::mutex> lock(call_mutex_);
  const OpInfo info = make_p2p_info(OpType::SEND, tensors, " to rank ", dst, tag);
  return send_impl(info, std::move(tensors), dst, tag);
}

std::shared_ptr<Work> ProcessGroup::send(const Tensor& tensor, int dst, int tag) {
  return send(std::vector<Tensor>{tensor}, dst, tag);
}

std::shared_ptr<Work> ProcessGroup::recv(std::vector<Tensor> tensors, int src, int tag) {
  check_p2p("recv", tensors, src, "src");
  for (auto& t : tensors) t.bump_version();
  std::lock_guard<std::mutex> lock(call_mutex_);
  const OpInfo info = make_p2p_info(OpType::RECV, tensors, " from rank ", src, tag);
  return recv_impl(info, std::move(tensors), src, tag);
}

std::shared_ptr<Work> ProcessGroup::recv(const Tensor& tensor, int src, int tag) {
  return recv(std::vector<Tensor>{tensor}, src, tag);
}

}  // namespace ember::parallel
