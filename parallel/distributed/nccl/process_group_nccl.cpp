#include "parallel/distributed/nccl/process_group_nccl.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <optional>
#include <thread>

#include "core/device.h"
#include "core/error.h"
#include "parallel/distributed/detail/broken_state.h"
#include "core/stream.h"
#include "parallel/distributed/detail/local_device.h"
#include "parallel/distributed/nccl/collectives.h"

// Note [nccl completion and failure]
// An operation is enqueued on the group's stream from the calling thread, between a start
// event recorded on the caller's current stream of the group's device (which the group's stream
// waits for, so the inputs are ready) and an end event. The Work is done once the end event is: wait() polls
// it, and the watchdog thread polls every pending Work's event and the communicator's async
// error. When NCCL reports an error, or an operation is still pending timeout_ms after it
// was enqueued (a hung or dead peer), the watchdog aborts the communicator (ncclCommAbort,
// which also ends the kernels waiting for that peer) and fails every pending Work with
// DistributedError: the group is broken and must be rebuilt.

namespace ember::parallel {

using Clock = std::chrono::steady_clock;

namespace {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    cudaGetDevice(&previous_);
    if (previous_ != device) cudaSetDevice(device);
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }

 private:
  int previous_ = 0;
};

// The calling thread's current stream on cuda:device (core/stream.h) as a cudaStream_t.
cudaStream_t current_cuda_stream(int device) {
  const Stream s = current_stream(Device::cuda(device));
  return s.is_default() ? cudaStreamLegacy : reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(s.id()));
}

}  // namespace

class NcclWork;

struct ProcessGroupNCCL::Impl {
  nccl::Comm comm;
  int64_t timeout_ms = 0;
  std::string who;

  mutable std::mutex mutex;
  std::condition_variable cv;
  bool stop = false;                // guarded by mutex
  // Broken under `mutex`, together with taking the pending Works; read anywhere.
  detail::BrokenState state;
  std::list<std::weak_ptr<NcclWork>> pending;  // guarded by mutex
  std::thread watchdog;

  // Aborts the communicator and fails every pending Work. Idempotent.
  void break_group(const std::string& reason);
  void watchdog_loop();
};

class NcclWork final : public Work {
 public:
  NcclWork(std::string description, std::shared_ptr<ProcessGroupNCCL::Impl> impl)
      : Work(std::move(description)), impl_(std::move(impl)) {
    // On the group's device: an event is recorded only on a stream of the device it was created
    // on (regression: created on the thread's current device, a second rank's first collective
    // failed to record it on its group's stream).
    DeviceGuard guard(impl_->comm.device);
    EMBER_CUDA_RT_CHECK(cudaEventCreateWithFlags(&end_, cudaEventDisableTiming), this->description());
    deadline_ = Clock::now() + std::chrono::milliseconds(impl_->timeout_ms);
  }
  ~NcclWork() override {
    if (end_ != nullptr) cudaEventDestroy(end_);
  }

  cudaEvent_t end_event() const { return end_; }
  Clock::time_point deadline() const { return deadline_; }
  void keep(std::vector<Tensor> tensors) {
    std::lock_guard<std::mutex> lock(keep_mutex_);
    for (auto& t : tensors) keep_.push_back(std::move(t));
  }

  /// Finishes the work when its event completed (or failed); returns whether it is finished.
  bool poll() {
    if (Work::is_completed()) return true;
    const cudaError_t q = cudaEventQuery(end_);
    if (q == cudaErrorNotReady) return false;
    if (q == cudaSuccess) {
      release();
      finish();
    } else {
      release();
      finish(std::make_exception_ptr(DistributedError(description() + " failed: " + cudaGetErrorString(q))));
    }
    return true;
  }

  void release() {
    std::lock_guard<std::mutex> lock(keep_mutex_);
    keep_.clear();
  }

  bool is_completed() override { return poll(); }

  /// Orders the calling thread's current stream on the group's device after the operation
  /// (cudaStreamWaitEvent), without blocking the host, as PyTorch's WorkNCCL::wait does; kernels
  /// the caller launches next on that stream see the results.
  void wait_stream() {
    DeviceGuard guard(impl_->comm.device);
    EMBER_CUDA_RT_CHECK(cudaStreamWaitEvent(current_cuda_stream(impl_->comm.device), end_, 0), description());
  }

  void wait(int64_t timeout_ms) override {
    wait_stream();  // the stream-side wait first; then the host waits too (wait()'s contract)
    const auto start = Clock::now();
    while (!poll()) {
      if (timeout_ms >= 0 && Clock::now() - start >= std::chrono::milliseconds(timeout_ms)) throw_timeout(timeout_ms);
      if (Clock::now() >= deadline_)
        impl_->break_group(description() + " failed: not finished within " + std::to_string(impl_->timeout_ms) +
                           " ms (a peer is hung or dead, or did not call it)");
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    Work::wait(0);  // rethrows the error, if any
  }

 private:
  std::shared_ptr<ProcessGroupNCCL::Impl> impl_;
  cudaEvent_t end_ = nullptr;
  Clock::time_point deadline_;
  std::mutex keep_mutex_;
  std::vector<Tensor> keep_;  // guarded by keep_mutex_: tensors the stream still uses
};

void ProcessGroupNCCL::Impl::break_group(const std::string& reason) {
  std::list<std::weak_ptr<NcclWork>> failing;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!state.break_group(reason)) return;
    failing.swap(pending);
  }
  if (comm.comm != nullptr) ncclCommAbort(comm.comm);  // ends kernels stuck on a peer
  for (auto& w : failing)
    if (auto work = w.lock()) {
      work->finish(std::make_exception_ptr(DistributedError(work->description() + " failed: the process group broke: " + reason)));
      // The kernels are gone with the communicator; the stream is past these buffers.
      work->release();
    }
  cv.notify_all();
}

void ProcessGroupNCCL::Impl::watchdog_loop() {
  DeviceGuard guard(comm.device);
  std::unique_lock<std::mutex> lock(mutex);
  while (!stop) {
    cv.wait_for(lock, std::chrono::milliseconds(10));
    if (stop || state.broken()) continue;
    std::vector<std::shared_ptr<NcclWork>> works;
    for (auto it = pending.begin(); it != pending.end();) {
      if (auto w = it->lock()) {
        works.push_back(std::move(w));
        ++it;
      } else {
        it = pending.erase(it);
      }
    }
    lock.unlock();
    std::string failure;
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm.comm, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress)
      failure = who + ": NCCL reported an asynchronous error: " + ncclGetErrorString(async);
    const auto now = Clock::now();
    for (auto& w : works) {
      if (w->poll()) continue;
      if (failure.empty() && now >= w->deadline())
        failure = w->description() + " failed: not finished within " + std::to_string(timeout_ms) +
                  " ms (a peer is hung or dead, or did not call it)";
    }
    if (!failure.empty()) break_group(failure);
    lock.lock();
    pending.remove_if([](const std::weak_ptr<NcclWork>& w) {
      auto s = w.lock();
      return !s || s->Work::is_completed();
    });
  }
}

std::vector<uint8_t> ProcessGroupNCCL::make_unique_id() {
  ncclUniqueId id;
  EMBER_NCCL_CHECK(ncclGetUniqueId(&id), std::string("nccl"));
  static_assert(sizeof(id.internal) == kUniqueIdBytes, "NCCL_UNIQUE_ID_BYTES changed");
  return std::vector<uint8_t>(id.internal, id.internal + kUniqueIdBytes);
}

LibraryVersion ProcessGroupNCCL::nccl_version() {
  LibraryVersion v;
  int loaded = 0;
  if (ncclGetVersion(&loaded) == ncclSuccess) v.loaded = loaded;
  v.built = NCCL_VERSION_CODE;
  return v;
}

ProcessGroupNCCL::ProcessGroupNCCL(std::shared_ptr<Store> store, int rank, int size, ProcessGroupNCCLOptions options)
    : ProcessGroup(rank, size) {
  EMBER_CHECK_T(ValueError, store != nullptr, "ProcessGroupNCCL: store is null");
  check_device_exists(Device::cuda(options.device < 0 ? 0 : options.device), who());
  std::vector<uint8_t> id;
  if (rank == 0) {
    id = make_unique_id();
    store->set("nccl/unique_id", id);
  } else {
    id = store->get("nccl/unique_id", options.timeout_ms);
  }
  init(std::move(id), options);
}

ProcessGroupNCCL::ProcessGroupNCCL(std::vector<uint8_t> unique_id, int rank, int size, ProcessGroupNCCLOptions options)
    : ProcessGroup(rank, size) {
  init(std::move(unique_id), options);
}

void ProcessGroupNCCL::init(std::vector<uint8_t> unique_id, ProcessGroupNCCLOptions options) {
  EMBER_CHECK_T(ValueError, options.timeout_ms > 0, "ProcessGroupNCCL: timeout_ms must be positive");
  const int count = cuda_device_count();
  check_device_exists(Device::cuda(0), who());  // DeviceError without a visible device
  EMBER_CHECK_T(DistributedError, unique_id.size() == kUniqueIdBytes, who(), ": the NCCL unique id has ",
                unique_id.size(), " bytes, expected ", kUniqueIdBytes);
  int device = options.device;
  if (device < 0) {
    const char* lr = std::getenv("LOCAL_RANK");
    device = parallel::detail::local_device_index(lr != nullptr ? std::optional<int>(std::atoi(lr)) : std::nullopt,
                                                  count);
  }
  check_device_exists(Device::cuda(device), who());
  impl_ = std::make_shared<Impl>();
  impl_->timeout_ms = options.timeout_ms;
  impl_->who = who();
  impl_->comm.rank = rank();
  impl_->comm.size = size();
  impl_->comm.device = device;

  DeviceGuard guard(device);
  EMBER_CUDA_RT_CHECK(cudaStreamCreateWithFlags(&impl_->comm.stream, cudaStreamNonBlocking), who());
  ncclUniqueId id;
  std::memcpy(id.internal, unique_id.data(), kUniqueIdBytes);
  // Non-blocking, so that rendezvous obeys the timeout instead of waiting forever.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, size(), id, rank(), &config);
  const auto deadline = Clock::now() + std::chrono::milliseconds(options.timeout_ms);
  if (r == ncclInProgress) r = nccl::detail::settle(comm, r, deadline);
  if (r != ncclSuccess) {
    if (comm != nullptr) ncclCommAbort(comm);
    cudaStreamDestroy(impl_->comm.stream);
    if (r == ncclInProgress)
      EMBER_THROW(DistributedError, who(), ": ncclCommInitRank did not finish within ", options.timeout_ms,
                  " ms (not every rank arrived)");
    EMBER_THROW(DistributedError, who(), ": ncclCommInitRank failed: ", ncclGetErrorString(r));
  }
  impl_->comm.comm = comm;
  auto impl = impl_;
  impl_->watchdog = std::thread([impl] { impl->watchdog_loop(); });
}

ProcessGroupNCCL::~ProcessGroupNCCL() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  impl_->watchdog.join();
  const bool broken = impl_->state.broken();
  DeviceGuard guard(impl_->comm.device);
  if (!broken) {
    // Let what is enqueued finish, for at most timeout_ms (regression: an unbounded
    // cudaStreamSynchronize hung here when a peer had died), then free the communicator; one
    // still busy then is aborted, which ends kernels waiting on a dead peer. A broken one was
    // aborted already.
    const auto deadline = Clock::now() + std::chrono::milliseconds(impl_->timeout_ms);
    cudaError_t q;
    while ((q = cudaStreamQuery(impl_->comm.stream)) == cudaErrorNotReady && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (q == cudaSuccess) {
      ncclCommDestroy(impl_->comm.comm);
    } else {
      ncclCommAbort(impl_->comm.comm);
    }
  }
  cudaStreamDestroy(impl_->comm.stream);
}

bool ProcessGroupNCCL::is_broken() const { return impl_->state.broken(); }

std::string ProcessGroupNCCL::broken_reason() const { return impl_->state.reason(); }

int ProcessGroupNCCL::device() const { return impl_->comm.device; }

void ProcessGroupNCCL::check_device(const std::string& op, const Tensor& t) const {
  EMBER_CHECK_T(ValueError, t.device() == Device::cuda(impl_->comm.device), who(), ": ", op,
                ": the nccl group works on cuda:", impl_->comm.device, ", got a tensor on ", t.device());
}

namespace {

// Enqueues `body` between the start and end events; returns its Work (already failed
// when the group is broken or the enqueue throws).
std::shared_ptr<Work> launch(const std::shared_ptr<ProcessGroupNCCL::Impl>& impl, const OpInfo& info,
                             std::vector<Tensor> tensors,
                             const std::function<void(const nccl::Comm&, std::vector<Tensor>& keep)>& body) {
  auto work = std::make_shared<NcclWork>(info.description, impl);
  if (impl->state.broken()) {
    work->finish(impl->state.not_run(info.description));
    return work;
  }
  // Declared outside the try: on an enqueue failure the buffers stay alive until the communicator
  // is aborted, since copies and kernels already queued may still touch them (regression: they
  // were released by the unwinding before break_group ran).
  std::vector<Tensor> keep;
  try {
    DeviceGuard guard(impl->comm.device);
    cudaEvent_t start;
    EMBER_CUDA_RT_CHECK(cudaEventCreateWithFlags(&start, cudaEventDisableTiming), info.description);
    // On the caller's current stream, where ember's kernels made the inputs (regression: recorded
    // on the legacy default stream, which does not order ember's non-blocking pool streams, so
    // inputs made under a StreamGuard could be read before they were written).
    EMBER_CUDA_RT_CHECK(cudaEventRecord(start, current_cuda_stream(impl->comm.device)), info.description);
    EMBER_CUDA_RT_CHECK(cudaStreamWaitEvent(impl->comm.stream, start, 0), info.description);
    cudaEventDestroy(start);
    nccl::Comm c = impl->comm;
    c.deadline = work->deadline();
    keep = std::move(tensors);
    body(c, keep);
    EMBER_CUDA_RT_CHECK(cudaEventRecord(work->end_event(), impl->comm.stream), info.description);
    work->keep(std::move(keep));
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    impl->break_group(msg);  // an enqueue that failed half-way leaves the ranks out of step
    work->finish(std::make_exception_ptr(DistributedError(msg)));
    keep.clear();  // only now: the abort ended what the stream had queued on them
    return work;
  }
  {
    // The group is broken under this mutex together with taking `pending`: a break between the
    // check at the top and here has already aborted the communicator and failed every pending
    // Work, and the watchdog no longer looks, so this Work must be failed here or its wait()
    // would never end.
    std::lock_guard<std::mutex> lock(impl->mutex);
    if (!impl->state.broken()) {
      impl->pending.push_back(work);
      return work;
    }
  }
  work->finish(std::make_exception_ptr(
      DistributedError(info.description + " failed: the process group broke: " + impl->state.reason())));
  work->release();  // the abort ended what the stream had queued on its buffers
  return work;
}

}  // namespace

std::shared_ptr<Work> ProcessGroupNCCL::all_reduce_impl(const OpInfo& info, std::vector<Tensor> tensors, ReduceOp op) {
  return launch(impl_, info, tensors, [&](const nccl::Comm& c, std::vector<Tensor>&) {
    nccl::all_reduce(c, info, tensors, op);
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::broadcast_impl(const OpInfo& info, std::vector<Tensor> tensors, int root) {
  return launch(impl_, info, tensors, [&](const nccl::Comm& c, std::vector<Tensor>&) {
    nccl::broadcast(c, info, tensors, root);
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::reduce_impl(const OpInfo& info, std::vector<Tensor> tensors, int root,
                                                    ReduceOp op) {
  return launch(impl_, info, tensors, [&](const nccl::Comm& c, std::vector<Tensor>&) {
    nccl::reduce(c, info, tensors, root, op);
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::all_gather_impl(const OpInfo& info, std::vector<Tensor> outputs, Tensor input) {
  std::vector<Tensor> all = outputs;
  all.push_back(input);
  return launch(impl_, info, all, [&](const nccl::Comm& c, std::vector<Tensor>& keep) {
    nccl::all_gather(c, info, outputs, input, keep);
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::reduce_scatter_impl(const OpInfo& info, Tensor output,
                                                            std::vector<Tensor> inputs, ReduceOp op) {
  std::vector<Tensor> all = inputs;
  all.push_back(output);
  return launch(impl_, info, all, [&](const nccl::Comm& c, std::vector<Tensor>& keep) {
    nccl::reduce_scatter(c, info, output, inputs, op, keep);
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::barrier_impl(const OpInfo& info) {
  return launch(impl_, info, {}, [&](const nccl::Comm& c, std::vector<Tensor>& keep) { nccl::barrier(c, info, keep); });
}

std::shared_ptr<Work> ProcessGroupNCCL::send_impl(const OpInfo& info, std::vector<Tensor> tensors, int dst, int tag) {
  return launch(impl_, info, tensors, [&](const nccl::Comm& c, std::vector<Tensor>&) {
    nccl::send(c, info, tensors, dst);
  });
}

std::shared_ptr<Work> ProcessGroupNCCL::recv_impl(const OpInfo& info, std::vector<Tensor> tensors, int src, int tag) {
  return launch(impl_, info, tensors, [&](const nccl::Comm& c, std::vector<Tensor>&) {
    nccl::recv(c, info, tensors, src);
  });
}

}  // namespace ember::parallel
