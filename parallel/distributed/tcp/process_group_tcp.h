// ProcessGroupTCP: the tcp backend, for CPU tensors (collectives also take CUDA tensors, staged
// through the host: Note [Host staging] in distributed/detail/host_staging.cpp), over a full mesh of TCP connections
// that it builds through a Store (see tcp/detail/mesh.h). Collectives run in call order on
// one worker thread per group, with ring algorithms that pipeline send, receive and
// reduce (Note [Ring pipeline] in tcp/all_reduce.cpp); send/recv run on their own thread
// (tcp/send_recv.h). A failure breaks the group for good: see Note [tcp failures] in
// process_group_tcp.cpp and parallel/README.md. Thread-safe as ProcessGroup says.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "parallel/distributed/process_group.h"
#include "parallel/distributed/store.h"

namespace ember::parallel {

namespace tcp {
class P2PEngine;
namespace detail {
class Mesh;
class Pipeline;
class GroupState;
class SharedMemory;
struct Context;
}  // namespace detail
}  // namespace tcp

struct ProcessGroupTCPOptions {
  /// Limit for each operation (from when the worker starts it) and for the rendezvous.
  int64_t timeout_ms = ProcessGroup::kDefaultTimeoutMs;
  /// The address the other ranks reach this one at; empty: tcp::detail::default_host()
  /// (EMBER_TCP_HOST, else this host's address on the route to MASTER_ADDR, else 127.0.0.1).
  std::string host;
  /// SO_SNDBUF/SO_RCVBUF of every connection; 0 leaves the kernel's autotuning.
  int socket_buffer_bytes = 4 << 20;
  /// Pipelining granularity of the ring algorithms.
  size_t segment_bytes = 256 << 10;
  /// all_reduce runs its ring over blocks of this many bytes, one after another, so that
  /// each block's data stays in the cache between reduce-scatter and all-gather.
  size_t block_bytes = 4 << 20;
  /// Same-host fast path (tcp/detail/cma.h): when every rank is on this host and may read the
  /// others' memory, all_reduces of at least cma_min_bytes copy their data with
  /// process_vm_readv instead of sending it through loopback TCP (the connections still carry
  /// the handshake). false, or EMBER_TCP_CMA=0 in the environment, keeps every byte on TCP.
  bool same_host_copy = true;
  size_t cma_min_bytes = 1 << 20;
  /// Same-host shared memory (tcp/detail/shm.h), tried before same_host_copy: when every rank
  /// is on this host, each maps the others' segments of shm_bytes (plus a 4 KiB control block)
  /// and every all_reduce moves its data through them (Note [Shared-memory all_reduce] in
  /// tcp/all_reduce.cpp), in rounds of at most shm_bytes. false, or EMBER_TCP_SHM=0 in the
  /// environment, turns it off. shm_bytes must be at least 4096.
  bool shared_memory = true;
  size_t shm_bytes = 4 << 20;
};

class ProcessGroupTCP final : public ProcessGroup {
 public:
  /// Connects to the other size-1 ranks through `store` (use a fresh store, or a
  /// PrefixStore, per group). Blocks until all are connected; throws DistributedError or
  /// TimeoutError naming the missing ranks after options.timeout_ms.
  ProcessGroupTCP(std::shared_ptr<Store> store, int rank, int size, ProcessGroupTCPOptions options = {});
  /// Aborts what is still queued or running (those Works fail with "aborted") and closes
  /// the connections. Wait for your Works first.
  ~ProcessGroupTCP() override;

  std::string backend_name() const override { return "tcp"; }
  const ProcessGroupTCPOptions& options() const { return options_; }

  /// True once an operation failed (or abort() was called); every later operation fails.
  bool is_broken() const override;
  /// Whether the same-host fast path is on for this group (ProcessGroupTCPOptions::same_host_copy).
  bool same_host_copy_active() const;
  /// Whether all_reduce runs through shared memory in this group (ProcessGroupTCPOptions::shared_memory).
  bool shared_memory_active() const;
  /// "host:port" the other ranks connect to (host as options.host or default_host() gave it;
  /// this rank's own connections leave from that host too). Empty for a group of one.
  const std::string& address() const;
  /// Why it broke (the first failure's message); empty while it is not.
  std::string broken_reason() const override;
  /// all_reduce_coalesced runs on every path; through shared memory it reads and writes the
  /// tensors in place (no flat copy), elsewhere it goes through one flat buffer.
  bool supports_all_reduce_coalesced() const override { return true; }
  /// Breaks the group now: running and queued operations fail with `reason`, and the peers'
  /// pending operations fail as their connections to this rank close.
  void abort(const std::string& reason = "abort() was called");

 protected:
  EMBER_PROCESS_GROUP_HOOKS_OVERRIDE;
  std::shared_ptr<Work> all_reduce_coalesced_impl(const OpInfo& info, std::vector<Tensor> tensors,
                                                  ReduceOp op) override;
  /// Every collective opens with headers that each rank compares with its ring neighbours'
  /// (tcp/detail/op_header.h, Note [Rooted headers] in tcp/broadcast.cpp).
  bool checks_arguments(OpType) const override { return true; }

 private:
  struct Task {
    OpType type = OpType::BARRIER;
    uint64_t seq = 0;
    std::shared_ptr<Work> work;
    std::string description;
    std::function<void()> run;
  };
  std::shared_ptr<Work> enqueue(const OpInfo& info, std::function<void()> run);
  /// enqueue() of a collective that works on `tensors` in place: the worker runs `body` on host
  /// copies of them (the tensors themselves when on the CPU) and copies the results back.
  std::shared_ptr<Work> enqueue_in_place(const OpInfo& info, std::vector<Tensor> tensors,
                                         std::function<void(std::vector<Tensor>& host)> body);
  void worker_loop();

  const ProcessGroupTCPOptions options_;
  std::shared_ptr<Store> store_;
  std::unique_ptr<tcp::detail::Mesh> mesh_;
  std::unique_ptr<tcp::detail::GroupState> state_;
  std::unique_ptr<tcp::detail::Pipeline> pipeline_;
  std::unique_ptr<tcp::detail::SharedMemory> shm_;
  std::unique_ptr<tcp::detail::Context> ctx_;  // worker thread only
  std::unique_ptr<tcp::P2PEngine> p2p_;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Task> queue_;  // guarded by mutex_
  bool stop_ = false;       // guarded by mutex_
  bool busy_ = false;       // guarded by mutex_: the worker is running a task
  std::thread worker_;
};

}  // namespace ember::parallel
