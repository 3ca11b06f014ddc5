#include "parallel/distributed/tcp/process_group_tcp.h"

#include <algorithm>

#include "core/error.h"
#include "parallel/distributed/detail/host_staging.h"
#include "parallel/distributed/tcp/collectives.h"
#include "parallel/distributed/tcp/detail/cma.h"
#include "parallel/distributed/tcp/detail/context.h"
#include "parallel/distributed/tcp/detail/mesh.h"
#include "parallel/distributed/tcp/detail/pipeline.h"
#include "parallel/distributed/tcp/detail/shm.h"
#include "parallel/distributed/tcp/send_recv.h"

// Note [tcp failures]
// Every blocking step of the tcp backend has a deadline: an operation's I/O must finish
// within timeout_ms of the worker starting it. The first failure of any operation (a
// connection closed or reset by a peer, a deadline passed, ranks disagreeing about which
// collective comes next, a send/recv size mismatch) breaks the group: GroupState records
// the message and shuts every socket down. That wakes this rank's blocked I/O at once, and
// the peers see their connections to this rank close, so their pending operations fail too
// (within moments, not after their own timeouts) — a dead or hung rank brings the whole
// group down within about one timeout, never a hang. A broken group stays broken: the bytes
// in flight on its streams are unaccounted for, so later operations fail at once with the
// original reason, and the job must build a new group (a new store prefix). Work::wait with a
// timeout of its own is different: its TimeoutError leaves the operation running and the
// group intact.

namespace ember::parallel {

using tcp::detail::Context;
using tcp::detail::GroupState;
using tcp::detail::Mesh;
using tcp::detail::MeshOptions;
using tcp::detail::Pipeline;

ProcessGroupTCP::ProcessGroupTCP(std::shared_ptr<Store> store, int rank, int size, ProcessGroupTCPOptions options)
    : ProcessGroup(rank, size), options_(std::move(options)), store_(std::move(store)) {
  EMBER_CHECK_T(ValueError, store_ != nullptr, "ProcessGroupTCP: store is null");
  EMBER_CHECK_T(ValueError, options_.timeout_ms > 0, "ProcessGroupTCP: timeout_ms must be positive, got ",
                options_.timeout_ms);
  EMBER_CHECK_T(ValueError, options_.segment_bytes > 0 && options_.block_bytes > 0,
                "ProcessGroupTCP: segment_bytes and block_bytes must be positive");
  EMBER_CHECK_T(ValueError, !options_.shared_memory || options_.shm_bytes >= 4096,
                "ProcessGroupTCP: shm_bytes must be at least 4096 with shared_memory on, got ", options_.shm_bytes);
  MeshOptions mo;
  mo.rank = rank;
  mo.size = size;
  mo.host = options_.host.empty() ? tcp::detail::default_host() : options_.host;
  mo.buffer_bytes = options_.socket_buffer_bytes;
  mo.timeout_ms = options_.timeout_ms;
  mo.who = who();
  mesh_ = std::make_unique<Mesh>(*store_, mo);
  state_ = std::make_unique<GroupState>(mesh_.get());
  ctx_ = std::make_unique<Context>();
  Context* ctx = ctx_.get();
  // Blocking inline sends must fit in the peer's receive buffer (see Pipeline::run); the
  // kernel's autotuned buffers start at 128 KiB on Linux.
  const size_t inline_bytes =
      options_.socket_buffer_bytes > 0
          ? std::min(Pipeline::kInlineSendBytes, static_cast<size_t>(options_.socket_buffer_bytes) / 4)
          : Pipeline::kInlineSendBytes;
  pipeline_ = std::make_unique<Pipeline>(
      [ctx](const tcp::detail::PipelineFailure& f) { ctx->on_pipeline_failure(f); }, inline_bytes);
  ctx_->rank = rank;
  ctx_->size = size;
  ctx_->timeout_ms = options_.timeout_ms;
  ctx_->segment_bytes = options_.segment_bytes;
  ctx_->block_bytes = options_.block_bytes;
  ctx_->mesh = mesh_.get();
  ctx_->pipeline = pipeline_.get();
  ctx_->state = state_.get();
  ctx_->cma_min_bytes = options_.cma_min_bytes;
  ctx_->cma_pids = tcp::detail::probe_cma(*store_, rank, size, options_.same_host_copy, options_.timeout_ms);
  shm_ = tcp::detail::SharedMemory::create(*store_, rank, size, options_.shared_memory, options_.shm_bytes,
                                           options_.timeout_ms);
  ctx_->shm = shm_.get();
  p2p_ = std::make_unique<tcp::P2PEngine>(rank, size, mesh_.get(), state_.get(), options_.timeout_ms);
  worker_ = std::thread([this] { worker_loop(); });
}

ProcessGroupTCP::~ProcessGroupTCP() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  // Queued operations fail in the worker; a running one is woken by the sockets' shutdown.
  bool idle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    idle = queue_.empty() && !busy_;
  }
  if (!idle) state_->break_group(who() + ": the process group was destroyed with operations pending");
  worker_.join();
  p2p_.reset();
  pipeline_.reset();
}

bool ProcessGroupTCP::is_broken() const { return state_->broken(); }
bool ProcessGroupTCP::same_host_copy_active() const { return !ctx_->cma_pids.empty(); }
bool ProcessGroupTCP::shared_memory_active() const { return shm_ != nullptr; }
const std::string& ProcessGroupTCP::address() const { return mesh_->address(); }

std::string ProcessGroupTCP::broken_reason() const { return state_->reason(); }

void ProcessGroupTCP::abort(const std::string& reason) { state_->break_group(who() + ": aborted: " + reason); }

void ProcessGroupTCP::check_device(const std::string& op, const Tensor& t) const {
  // Collectives stage CUDA tensors through the host (Note [Host staging]); send/recv do not.
  EMBER_CHECK_T(ValueError, t.device().is_cpu() || (t.device().is_cuda() && op != "send" && op != "recv"), who(), ": ",
                op, ": the tcp backend takes CPU tensors here (collectives also take CUDA tensors, staged "
                "through the host), got one on ", t.device(), " (use the nccl backend, or copy to the CPU)");
}

std::shared_ptr<Work> ProcessGroupTCP::enqueue(const OpInfo& info, std::function<void()> run) {
  auto work = std::make_shared<Work>(info.description);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({info.type, info.seq, work, info.description, std::move(run)});
  }
  cv_.notify_one();
  return work;
}

void ProcessGroupTCP::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    Task task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::exception_ptr error;
    if (state_->broken()) {
      error = state_->not_run(task.description);
    } else {
      try {
        if (shm_) shm_->enter(task.type, task.seq);  // Note [Shared-memory all_reduce]
        task.run();
      } catch (const DistributedError&) {
        error = std::current_exception();
      } catch (const std::exception& e) {
        // Not an I/O failure (e.g. bad_alloc); the streams may be mid-message all the same.
        const std::string msg = task.description + " failed: " + e.what();
        state_->break_group(msg);
        error = std::make_exception_ptr(DistributedError(msg));
      }
    }
    std::shared_ptr<Work> work = std::move(task.work);
    task = Task{};  // drop the tensors before the caller may reuse them
    lock.lock();
    busy_ = false;
    lock.unlock();
    work->finish(std::move(error));  // the Work holds the only reference to the error now
    lock.lock();
  }
}

// CUDA tensors are staged through the host (Note [Host staging] in
// parallel/distributed/detail/host_staging.cpp): the caller waits for its streams, the worker
// copies in, runs the collective on host memory and copies the results back.
std::shared_ptr<Work> ProcessGroupTCP::enqueue_in_place(const OpInfo& info, std::vector<Tensor> tensors,
                                                        std::function<void(std::vector<Tensor>& host)> body) {
  detail::wait_for_producers(tensors);
  return enqueue(info, [tensors, body = std::move(body)]() {
    std::vector<Tensor> host = detail::host_copies(tensors);
    body(host);
    detail::copy_back(tensors, host);
  });
}

std::shared_ptr<Work> ProcessGroupTCP::all_reduce_impl(const OpInfo& info, std::vector<Tensor> tensors, ReduceOp op) {
  return enqueue_in_place(info, std::move(tensors),
                          [this, info, op](std::vector<Tensor>& host) { tcp::all_reduce(*ctx_, info, host, op); });
}

std::shared_ptr<Work> ProcessGroupTCP::all_reduce_coalesced_impl(const OpInfo& info, std::vector<Tensor> tensors,
                                                                ReduceOp op) {
  return enqueue_in_place(info, std::move(tensors), [this, info, op](std::vector<Tensor>& host) {
    tcp::all_reduce_coalesced(*ctx_, info, host, op);
  });
}

std::shared_ptr<Work> ProcessGroupTCP::broadcast_impl(const OpInfo& info, std::vector<Tensor> tensors, int root) {
  return enqueue_in_place(info, std::move(tensors),
                          [this, info, root](std::vector<Tensor>& host) { tcp::broadcast(*ctx_, info, host, root); });
}

std::shared_ptr<Work> ProcessGroupTCP::reduce_impl(const OpInfo& info, std::vector<Tensor> tensors, int root,
                                                   ReduceOp op) {
  return enqueue_in_place(info, std::move(tensors), [this, info, root, op](std::vector<Tensor>& host) {
    tcp::reduce(*ctx_, info, host, root, op);
  });
}

std::shared_ptr<Work> ProcessGroupTCP::all_gather_impl(const OpInfo& info, std::vector<Tensor> outputs, Tensor input) {
  detail::wait_for_producers({input});
  return enqueue(info, [this, info, outputs, input]() {
    std::vector<Tensor> host_out = detail::host_copies(outputs);
    Tensor host_in = detail::host_copies({input})[0];
    tcp::all_gather(*ctx_, info, host_out, host_in);
    detail::copy_back(outputs, host_out);
  });
}

std::shared_ptr<Work> ProcessGroupTCP::reduce_scatter_impl(const OpInfo& info, Tensor output,
                                                           std::vector<Tensor> inputs, ReduceOp op) {
  detail::wait_for_producers(inputs);
  return enqueue(info, [this, info, output, inputs, op]() {
    std::vector<Tensor> host_in = detail::host_copies(inputs);
    Tensor host_out = detail::host_copies({output})[0];
    tcp::reduce_scatter(*ctx_, info, host_out, host_in, op);
    detail::copy_back({output}, {host_out});
  });
}

std::shared_ptr<Work> ProcessGroupTCP::barrier_impl(const OpInfo& info) {
  return enqueue(info, [this, info]() { tcp::barrier(*ctx_, info); });
}

std::shared_ptr<Work> ProcessGroupTCP::send_impl(const OpInfo& info, std::vector<Tensor> tensors, int dst, int tag) {
  auto work = std::make_shared<Work>(info.description);
  p2p_->send(work, info, std::move(tensors), dst, tag);
  return work;
}

std::shared_ptr<Work> ProcessGroupTCP::recv_impl(const OpInfo& info, std::vector<Tensor> tensors, int src, int tag) {
  auto work = std::make_shared<Work>(info.description);
  p2p_->recv(work, info, std::move(tensors), src, tag);
  return work;
}

}  // namespace ember::parallel
