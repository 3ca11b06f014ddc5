#include "parallel/distributed/process_group_debug.h"

#include <cstdlib>
#include <sstream>

#include "core/error.h"
#include "parallel/distributed/process_group.h"

// Note [Desync check]
// Ranks that call different collectives (or the same one with other shapes, dtypes, roots or
// reduce ops) hang or exchange garbage on most backends; PyTorch's TORCH_DISTRIBUTED_DEBUG=
// DETAIL finds it by comparing what the ranks call. With EMBER_DISTRIBUTED_DEBUG=DETAIL (or
// ProcessGroup::set_desync_check(true)) the base class, before handing a collective to its
// backend, all-gathers a fixed-size fingerprint of it (CollectiveFingerprint: op, sequence
// number, dtype, number of tensors and elements, the first tensor's shape, root, reduce op:
// kLength int64s) through the backend's own all_gather, so tcp, mpi and nccl get the same
// check. The all_gather has the same shape on every rank whatever each is about to call, so it
// cannot itself mismatch; every rank compares all fingerprints and, on a difference, throws
// the same DistributedError listing each rank's call ("rank 1 called all_reduce #7 (float32,
// [1024]); rank 0 called broadcast #7 (float32, [512], root 0)"). Cost: one small
// all_gather per collective, so it is a debugging mode. A rank that stopped calling
// collectives makes the check's all_gather fail at the backend's timeout; that error and any
// other failure of the check carry the flight recorder (the last collectives this rank
// entered, and with a debug store every rank's last one).

namespace ember::parallel {

DebugLevel debug_level_from_env() {
  const char* v = std::getenv("EMBER_DISTRIBUTED_DEBUG");
  if (!v || !*v) return DebugLevel::kOff;
  const std::string s(v);
  if (s == "OFF" || s == "off" || s == "0") return DebugLevel::kOff;
  if (s == "INFO" || s == "info") return DebugLevel::kInfo;
  if (s == "DETAIL" || s == "detail") return DebugLevel::kDetail;
  EMBER_THROW(ValueError, "EMBER_DISTRIBUTED_DEBUG: expected OFF, INFO or DETAIL, got '", s, "'");
}

CollectiveFingerprint CollectiveFingerprint::make(OpType type, uint64_t seq, const std::vector<Tensor>& tensors,
                                                  int root, int reduce_op) {
  CollectiveFingerprint f;
  f.op = static_cast<int64_t>(type);
  f.seq = static_cast<int64_t>(seq);
  f.num_tensors = static_cast<int64_t>(tensors.size());
  f.root = root;
  f.reduce_op = reduce_op;
  if (!tensors.empty()) {
    f.dtype = static_cast<int64_t>(tensors.front().dtype());
    f.ndim = tensors.front().dim();
    for (int64_t d = 0; d < f.ndim && d < kMaxDims; ++d) f.dims.push_back(tensors.front().sizes()[d]);
    for (const auto& t : tensors) f.numel += t.numel();
  }
  return f;
}

std::vector<int64_t> CollectiveFingerprint::encode() const {
  std::vector<int64_t> v{0x454d4644 /* "EMFD" */, op, seq, dtype, num_tensors, numel, root, reduce_op, ndim,
                         static_cast<int64_t>(dims.size())};
  for (int i = 0; i < kMaxDims; ++i) v.push_back(i < static_cast<int>(dims.size()) ? dims[i] : 0);
  return v;
}

CollectiveFingerprint CollectiveFingerprint::decode(const int64_t* v) {
  CollectiveFingerprint f;
  f.op = v[1], f.seq = v[2], f.dtype = v[3], f.num_tensors = v[4], f.numel = v[5], f.root = v[6];
  f.reduce_op = v[7], f.ndim = v[8];
  for (int64_t i = 0; i < v[9] && i < kMaxDims; ++i) f.dims.push_back(v[10 + i]);
  return f;
}

bool CollectiveFingerprint::operator==(const CollectiveFingerprint& o) const { return encode() == o.encode(); }

std::string CollectiveFingerprint::str() const {
  std::ostringstream os;
  os << op_type_name(static_cast<OpType>(op)) << " #" << seq;
  if (dtype >= 0) {
    os << " (" << static_cast<DType>(dtype) << ", [";
    for (size_t i = 0; i < dims.size(); ++i) os << (i ? ", " : "") << dims[i];
    if (ndim > static_cast<int64_t>(dims.size())) os << ", ...";
    os << "]";
    if (num_tensors > 1) os << " in " << num_tensors << " tensors, " << numel << " elements";
    if (root >= 0) os << ", root " << root;
    if (reduce_op >= 0) os << ", " << reduce_op_name(static_cast<ReduceOp>(reduce_op));
    os << ")";
  }
  return os.str();
}

std::shared_ptr<FlightRecorder::Entry> FlightRecorder::enter(uint64_t seq, std::string what) {
  auto e = std::make_shared<Entry>();
  e->seq = seq;
  e->what = std::move(what);
  e->start = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lk(mu_);
  entries_.push_back(e);
  while (entries_.size() > capacity_) entries_.pop_front();
  return e;
}

std::string FlightRecorder::dump(int rank) const {
  std::lock_guard<std::mutex> lk(mu_);
  std::ostringstream os;
  os << "flight recorder of rank " << rank << " (last " << entries_.size() << " collectives, oldest first):";
  if (entries_.empty()) os << " none";
  const auto now = std::chrono::steady_clock::now();
  for (const auto& e : entries_) {
    os << "\n  " << e->what;
    const int64_t us = e->duration_us.load();
    if (us < 0) {
      os << ": running for " << std::chrono::duration_cast<std::chrono::milliseconds>(now - e->start).count() << " ms";
    } else {
      os << (e->failed.load() ? ": failed after " : ": completed in ") << static_cast<double>(us) / 1000.0 << " ms";
    }
  }
  return os.str();
}

std::string FlightRecorder::last_entered() const {
  std::lock_guard<std::mutex> lk(mu_);
  return entries_.empty() ? std::string() : entries_.back()->what;
}

}  // namespace ember::parallel
