// ProcessGroup: the ranks 0..size()-1 of one job and the collectives they run together.
// Abstract; the backends are tcp/ (ProcessGroupTCP), mpi/ (ProcessGroupMPI) and nccl/
// (ProcessGroupNCCL), made by init_process_group (init.h) or directly.
//
// Every operation is asynchronous: it checks its arguments on the calling thread (throwing
// ValueError/TypeError before anything is queued), queues the operation on the group's
// worker, and returns a Work to wait on. Operations run in the order they were called, and
// every rank must call the collectives in the same order with matching shapes and dtypes.
// Thread-safe: calls from several threads are serialized, and the order they take is the
// order the operations run in (so the ranks must agree on it); Works may be waited on from
// any thread. Tensors are handles: the group keeps them alive until the Work finishes, and
// the caller must not touch their data before that. In-place as PyTorch: all_reduce and
// broadcast overwrite their tensors. Tensors must be contiguous (call contiguous() first);
// 0-element tensors are fine. Dtypes: float32, float64, int64, int32, bf16, float16.
// See parallel/README.md for which errors leave the group usable.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "parallel/distributed/process_group_debug.h"
#include "parallel/distributed/reduce_op.h"
#include "parallel/distributed/work.h"

namespace ember::parallel {

class Store;

enum class OpType { ALL_REDUCE, BROADCAST, REDUCE, ALL_GATHER, REDUCE_SCATTER, BARRIER, SEND, RECV };

/// "all_reduce", "broadcast", ...
const char* op_type_name(OpType type);

/// What the base class hands a backend with each operation.
struct OpInfo {
  OpType type = OpType::BARRIER;
  /// Collectives: 1, 2, 3, ... in call order, the same on every rank. Send/recv: their own
  /// per-group counter.
  uint64_t seq = 0;
  /// "tcp rank 0/4: all_reduce #3 (float32, 1000 elements)": the start of every message.
  std::string description;
};

class ProcessGroup {
 public:
  /// The default per-operation timeout: as torch.distributed, 30 minutes.
  static constexpr int64_t kDefaultTimeoutMs = 30 * 60 * 1000;

  /// Throws ValueError unless 0 <= rank < size.
  ProcessGroup(int rank, int size);
  virtual ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// "tcp", "mpi" or "nccl".
  virtual std::string backend_name() const = 0;
  /// True once a failure made the group unusable (every later operation fails); see
  /// parallel/README.md. broken_reason() is the first failure's message ("" while usable).
  virtual bool is_broken() const = 0;
  virtual std::string broken_reason() const = 0;

  /// Reduces every tensor (independently) across ranks, writing the result into it.
  std::shared_ptr<Work> all_reduce(std::vector<Tensor> tensors, ReduceOp op = ReduceOp::SUM);
  std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::SUM);
  /// Reduces the tensors as one (PyTorch's allreduce_coalesced): the same collective as an
  /// all_reduce of one flat tensor holding their elements in order, so ranks may mix the two
  /// forms, with the results written back into each tensor; one collective however many
  /// tensors. They must share dtype and device. Throws ValueError where the backend has no
  /// such collective (supports_all_reduce_coalesced() is false).
  std::shared_ptr<Work> all_reduce_coalesced(std::vector<Tensor> tensors, ReduceOp op = ReduceOp::SUM);
  /// Whether all_reduce_coalesced works on this backend (tcp: yes, reading and writing the
  /// tensors in place, see Note [Shared-memory all_reduce]).
  virtual bool supports_all_reduce_coalesced() const { return false; }
  /// Copies root's tensors into every other rank's (same shapes on every rank).
  std::shared_ptr<Work> broadcast(std::vector<Tensor> tensors, int root = 0);
  std::shared_ptr<Work> broadcast(const Tensor& tensor, int root = 0);
  /// Reduces every tensor across ranks into root's tensor; other ranks' are left as they were.
  std::shared_ptr<Work> reduce(std::vector<Tensor> tensors, int root = 0, ReduceOp op = ReduceOp::SUM);
  std::shared_ptr<Work> reduce(const Tensor& tensor, int root = 0, ReduceOp op = ReduceOp::SUM);
  /// outputs[r] receives rank r's input; outputs.size() == size(), each with input's dtype
  /// and number of elements.
  std::shared_ptr<Work> all_gather(std::vector<Tensor> outputs, const Tensor& input);
  /// output = the reduction over ranks of their inputs[rank()]; inputs.size() == size(),
  /// each with output's dtype and number of elements. Inputs are not modified.
  std::shared_ptr<Work> reduce_scatter(const Tensor& output, std::vector<Tensor> inputs,
                                       ReduceOp op = ReduceOp::SUM);
  /// Finishes once every rank called barrier().
  std::shared_ptr<Work> barrier();
  // ---- debugging (process_group_debug.h) ------------------------------------------------------
  /// EMBER_DISTRIBUTED_DEBUG at construction; DETAIL turns the desync check on.
  DebugLevel debug_level() const { return debug_level_; }
  void set_debug_level(DebugLevel level);
  /// Note [Desync check]: before each collective the ranks compare what they call and all
  /// fail with a DistributedError naming each rank's call when they differ.
  bool desync_check() const { return debug_level_ == DebugLevel::kDetail; }
  /// With a store, every collective also records in it the last collective this rank entered
  /// (key "ember_debug/last_collective/<rank>"), so debug_report() names every rank's.
  void set_debug_store(std::shared_ptr<Store> store);
  /// How long the desync check waits for the other ranks' fingerprints (the backend's own
  /// timeout applies as well). Default: kDefaultTimeoutMs.
  void set_debug_timeout_ms(int64_t timeout_ms) { debug_timeout_ms_ = timeout_ms; }
  /// This rank's flight recorder (the last collectives it entered, with their state) and, with
  /// a debug store, the last collective every rank entered.
  std::string debug_report(int64_t store_timeout_ms = 1000) const;

  /// Point to point, matched by (peer, tag) in order, independent of the collectives'
  /// order: send's tensors go, one after another, into the recv with the same tag on dst.
  std::shared_ptr<Work> send(std::vector<Tensor> tensors, int dst, int tag = 0);
  std::shared_ptr<Work> send(const Tensor& tensor, int dst, int tag = 0);
  std::shared_ptr<Work> recv(std::vector<Tensor> tensors, int src, int tag = 0);
  std::shared_ptr<Work> recv(const Tensor& tensor, int src, int tag = 0);

 protected:
  virtual std::shared_ptr<Work> all_reduce_impl(const OpInfo& info, std::vector<Tensor> tensors,
                                                ReduceOp op) = 0;
  /// Backends with supports_all_reduce_coalesced() override this; the default throws.
  virtual std::shared_ptr<Work> all_reduce_coalesced_impl(const OpInfo& info, std::vector<Tensor> tensors,
                                                          ReduceOp op);
  virtual std::shared_ptr<Work> broadcast_impl(const OpInfo& info, std::vector<Tensor> tensors,
                                               int root) = 0;
  virtual std::shared_ptr<Work> reduce_impl(const OpInfo& info, std::vector<Tensor> tensors,
                                            int root, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> all_gather_impl(const OpInfo& info, std::vector<Tensor> outputs,
                                                Tensor input) = 0;
  virtual std::shared_ptr<Work> reduce_scatter_impl(const OpInfo& info, Tensor output,
                                                    std::vector<Tensor> inputs, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> barrier_impl(const OpInfo& info) = 0;
  virtual std::shared_ptr<Work> send_impl(const OpInfo& info, std::vector<Tensor> tensors, int dst,
                                          int tag) = 0;
  virtual std::shared_ptr<Work> recv_impl(const OpInfo& info, std::vector<Tensor> tensors, int src,
                                          int tag) = 0;
  /// Throws ValueError when the backend cannot use tensors on `device` (tcp, mpi: CPU only).
  virtual void check_device(const std::string& op, const Tensor& t) const = 0;
  /// Note [Argument check]: whether the backend itself fails a collective of `type` whose
  /// arguments (root, sizes, dtype, op) differ between ranks. Where it does not, the base
  /// class compares the ranks' fingerprints before the collective. The default: every
  /// collective but the rooted ones, whose mismatches MPI and NCCL leave silent or hung.
  virtual bool checks_arguments(OpType type) const { return type != OpType::BROADCAST && type != OpType::REDUCE; }

  /// "tcp rank 0/4"
  std::string who() const;

 private:
  OpInfo make_info(OpType type, const std::vector<Tensor>& tensors);
  /// make_info's, its description followed by `to_or_from` (" to rank ", " from rank "), peer and tag.
  OpInfo make_p2p_info(OpType type, const std::vector<Tensor>& tensors, const char* to_or_from, int peer, int tag);
  void check_tensor(const std::string& op, const Tensor& t, const char* what) const;
  /// all_gather's outputs / reduce_scatter's inputs: one per rank, each with `one`'s dtype and
  /// number of elements.
  void check_per_rank(const std::string& op, const std::vector<Tensor>& per_rank, const char* per_rank_what,
                      const Tensor& one, const char* one_what) const;
  void check_rank_arg(const std::string& op, int r, const char* what, bool allow_self) const;
  /// send/recv: at least one tensor, all of one dtype; `peer` (dst or src) another rank.
  void check_p2p(const std::string& op, const std::vector<Tensor>& tensors, int peer, const char* peer_what) const;

  /// Numbers nothing: runs the desync check when on, records the call in the flight recorder,
  /// launches it. Called with call_mutex_ held.
  std::shared_ptr<Work> run_collective(const CollectiveFingerprint& fp, const std::vector<Tensor>& tensors,
                                       const std::function<std::shared_ptr<Work>()>& launch);
  /// All-gathers the ranks' fingerprints and throws DistributedError naming every rank's call
  /// when they differ: as the desync check (DETAIL), or as Note [Argument check].
  void verify_fingerprint(const CollectiveFingerprint& fp, Device device, bool desync);

  const int rank_;
  const int size_;
  DebugLevel debug_level_ = DebugLevel::kOff;
  int64_t debug_timeout_ms_ = kDefaultTimeoutMs;
  FlightRecorder recorder_{16};
  mutable std::mutex debug_mutex_;
  std::shared_ptr<Store> debug_store_;  // guarded by debug_mutex_
  Device last_device_ = Device::cpu();  // guarded by call_mutex_: where the desync check of a barrier runs
  // Held from numbering an operation until its backend queued it, so that numbers and
  // queue order agree.
  std::mutex call_mutex_;
  uint64_t collective_seq_ = 0;  // guarded by call_mutex_
  uint64_t p2p_seq_ = 0;         // guarded by call_mutex_
};

/// Declares the backend hooks above (every pure virtual *_impl and check_device) as overrides, in
/// the protected section of each backend, so their signatures are written once (here and in
/// ProcessGroup). A new collective's *_impl is added here too; every backend defines them all.
#define EMBER_PROCESS_GROUP_HOOKS_OVERRIDE                                                                     \
  std::shared_ptr<Work> all_reduce_impl(const OpInfo& info, std::vector<Tensor> tensors, ReduceOp op) override; \
  std::shared_ptr<Work> broadcast_impl(const OpInfo& info, std::vector<Tensor> tensors, int root) override;     \
  std::shared_ptr<Work> reduce_impl(const OpInfo& info, std::vector<Tensor> tensors, int root,                  \
                                    ReduceOp op) override;                                                      \
  std::shared_ptr<Work> all_gather_impl(const OpInfo& info, std::vector<Tensor> outputs, Tensor input) override; \
  std::shared_ptr<Work> reduce_scatter_impl(const OpInfo& info, Tensor output, std::vector<Tensor> inputs,      \
                                            ReduceOp op) override;                                              \
  std::shared_ptr<Work> barrier_impl(const OpInfo& info) override;                                              \
  std::shared_ptr<Work> send_impl(const OpInfo& info, std::vector<Tensor> tensors, int dst, int tag) override;  \
  std::shared_ptr<Work> recv_impl(const OpInfo& info, std::vector<Tensor> tensors, int src, int tag) override;  \
  void check_device(const std::string& op, const Tensor& t) const override

}  // namespace ember::parallel
