#include "parallel/distributed/mpi/process_group_mpi.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>

#include "core/error.h"
#include "parallel/distributed/detail/broken_state.h"
#include "parallel/distributed/mpi/collectives.h"

namespace ember::parallel {

using Clock = std::chrono::steady_clock;

namespace {
struct Task {
  std::shared_ptr<Work> work;
  std::string description;
  std::function<void()> run;          // a collective: runs to the end on the worker
  std::function<std::vector<MPI_Request>()> post;  // send/recv: posts requests
  std::vector<Tensor> tensors;        // send/recv: kept alive while requests are pending
  bool is_recv = false;
};

struct Pending {
  std::shared_ptr<Work> work;
  std::string description;
  std::vector<MPI_Request> requests;
  std::vector<Tensor> tensors;
  bool is_recv = false;
  Clock::time_point deadline;
};
}  // namespace

// Note [mpi timeouts]
// MPI cannot interrupt a blocking collective, and a dead peer usually makes mpirun end the
// whole job. For a hung peer, the watchdog thread watches the operation the worker runs:
// past its deadline it fails that Work (and everything queued behind it) with
// DistributedError and marks the group broken. The worker thread stays inside MPI; the
// group can only be left behind (its destructor detaches the stuck thread) and the process
// should exit, as with a timed-out NCCL communicator.
struct ProcessGroupMPI::Impl {
  mpi::Comm comm;
  int64_t timeout_ms = 0;
  std::string who;

  std::mutex mutex;
  std::condition_variable cv;            // wakes the worker
  std::condition_variable watchdog_cv;   // wakes the watchdog
  std::deque<Task> queue;                // guarded by mutex
  bool stop = false;                     // guarded by mutex
  // Broken under `mutex` (so that the watchdog's break and the queue it fails are one step);
  // read anywhere.
  detail::BrokenState state;
  std::shared_ptr<Work> running;         // guarded by mutex: the collective in MPI now
  Clock::time_point running_deadline;    // guarded by mutex
  bool worker_stuck = false;             // guarded by mutex: the watchdog gave up on it
  std::vector<Pending> pending;          // worker thread only
  std::vector<Pending> zombies;          // worker thread only: timed-out sends MPI still owns

  std::thread worker;
  std::thread watchdog;

  // Takes the queued tasks out; the caller fails them once it dropped the lock (a Work's
  // callbacks may call into the group).
  std::vector<std::pair<std::shared_ptr<Work>, std::exception_ptr>> take_queue_locked() {
    std::vector<std::pair<std::shared_ptr<Work>, std::exception_ptr>> out;
    for (auto& t : queue) out.emplace_back(t.work, state.not_run(t.description));
    queue.clear();
    return out;
  }

  void test_pending() {
    for (size_t i = 0; i < pending.size();) {
      Pending& p = pending[i];
      int done = 0;
      std::vector<MPI_Status> statuses(p.requests.size());
      std::exception_ptr error;
      {
        auto lock = mpi::detail::lock_mpi();
        const int rc = MPI_Testall(static_cast<int>(p.requests.size()), p.requests.data(), &done, statuses.data());
        if (rc != MPI_SUCCESS)
          error = std::make_exception_ptr(
              DistributedError(p.description + " failed: " + mpi::detail::error_string(rc)));
      }
      if (!error && done && p.is_recv) {
        for (size_t k = 0; k < statuses.size() && !error; ++k) {
          int count = 0;
          MPI_Get_count(&statuses[k], mpi::detail::mpi_datatype(p.tensors[k].dtype()), &count);
          if (count != p.tensors[k].numel())
            error = std::make_exception_ptr(DistributedError(
                p.description + " failed: tensor " + std::to_string(k) + " expects " +
                std::to_string(p.tensors[k].numel()) + " elements but the message had " + std::to_string(count)));
        }
      }
      if (!error && !done && Clock::now() >= p.deadline) {
        auto lock = mpi::detail::lock_mpi();
        for (auto& r : p.requests)
          if (r != MPI_REQUEST_NULL && p.is_recv) MPI_Cancel(&r);
        error = std::make_exception_ptr(DistributedError(
            p.description + " failed: timed out after " + std::to_string(timeout_ms) +
            " ms (the peer is hung, or never posted the matching " + (p.is_recv ? "send" : "recv") + ")"));
      }
      if (done || error) {
        p.work->finish(error);
        if (error && !done) {
          {
            std::lock_guard<std::mutex> lock(mutex);
            state.break_group(p.description + " timed out");
          }
          if (p.is_recv) {
            // A cancelled recv completes at once; then its tensors are free again.
            auto lock = mpi::detail::lock_mpi();
            MPI_Waitall(static_cast<int>(p.requests.size()), p.requests.data(), MPI_STATUSES_IGNORE);
          } else {
            zombies.push_back(std::move(p));  // MPI may still read the tensors: keep them
          }
        }
        pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      ++i;
    }
  }

  void worker_loop() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      if (pending.empty()) {
        cv.wait(lock, [&] { return stop || !queue.empty(); });
      } else if (queue.empty() && !stop) {
        // Progress send/recv while nothing else is queued.
        lock.unlock();
        test_pending();
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        lock.lock();
        continue;
      }
      if (queue.empty()) {
        if (stop) break;
        continue;
      }
      Task task = std::move(queue.front());
      queue.pop_front();
      if (state.broken()) {
        auto error = state.not_run(task.description);
        lock.unlock();
        task.work->finish(error);
        lock.lock();
        continue;
      }
      if (task.run) {
        running = task.work;
        running_deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
        watchdog_cv.notify_all();
      }
      lock.unlock();
      std::exception_ptr error;
      std::vector<MPI_Request> requests;
      try {
        auto mpi_lock = mpi::detail::lock_mpi();
        if (task.run) {
          task.run();
        } else {
          requests = task.post();
        }
      } catch (...) {
        error = std::current_exception();
      }
      std::string failure;
      if (error) {
        failure = "an earlier operation failed";
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          failure = e.what();
        }
      }
      if (error) {
        // Break first, so that nothing queued behind it runs on a communicator in an unknown state.
        std::lock_guard<std::mutex> guard(mutex);
        state.break_group(failure);
      }
      if (task.run || error) {
        task.work->finish(std::move(error));
      } else {
        pending.push_back({task.work, task.description, std::move(requests), std::move(task.tensors), task.is_recv,
                           Clock::now() + std::chrono::milliseconds(timeout_ms)});
      }
      task = Task{};
      test_pending();
      lock.lock();
      running.reset();
    }
    lock.unlock();
    for (auto& p : pending)
      p.work->finish(std::make_exception_ptr(DistributedError(p.description + " aborted: the process group was destroyed")));
  }

  void watchdog_loop() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stop) {
      if (!running) {
        watchdog_cv.wait(lock);
        continue;
      }
      std::shared_ptr<Work> w = running;
      if (watchdog_cv.wait_until(lock, running_deadline, [&] { return stop || running != w; })) continue;
      const std::string msg = w->description() + " failed: did not finish within " + std::to_string(timeout_ms) +
                              " ms (a peer is hung or dead; MPI cannot interrupt a collective, so this group is "
                              "unusable and the process should exit)";
      state.break_group(msg);
      worker_stuck = true;
      auto failed = take_queue_locked();
      failed.insert(failed.begin(), {w, std::make_exception_ptr(DistributedError(msg))});
      running.reset();
      lock.unlock();
      for (auto& [work, error] : failed) work->finish(error);
      lock.lock();
    }
  }
};

std::shared_ptr<ProcessGroupMPI> ProcessGroupMPI::create(ProcessGroupMPIOptions options) {
  EMBER_CHECK_T(ValueError, options.timeout_ms > 0, "ProcessGroupMPI: timeout_ms must be positive, got ",
                options.timeout_ms);
  mpi::detail::ensure_initialized();
  auto impl = std::make_shared<Impl>();
  {
    auto lock = mpi::detail::lock_mpi();
    EMBER_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &impl->comm.comm), std::string("mpi"));
    MPI_Comm_set_errhandler(impl->comm.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(impl->comm.comm, &impl->comm.rank);
    MPI_Comm_size(impl->comm.comm, &impl->comm.size);
  }
  impl->timeout_ms = options.timeout_ms;
  std::shared_ptr<ProcessGroupMPI> pg(new ProcessGroupMPI(impl->comm.rank, impl->comm.size, impl));
  impl->who = pg->who();
  impl->worker = std::thread([impl] { impl->worker_loop(); });
  impl->watchdog = std::thread([impl] { impl->watchdog_loop(); });
  return pg;
}

ProcessGroupMPI::ProcessGroupMPI(int rank, int size, std::shared_ptr<Impl> impl)
    : ProcessGroup(rank, size), impl_(std::move(impl)) {}

ProcessGroupMPI::~ProcessGroupMPI() {
  bool stuck;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stop = true;
    stuck = impl_->worker_stuck;
  }
  impl_->cv.notify_all();
  impl_->watchdog_cv.notify_all();
  impl_->watchdog.join();
  if (stuck) {
    impl_->worker.detach();  // inside MPI for good; it holds impl_ alive (Note [mpi timeouts])
    return;
  }
  impl_->worker.join();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    auto lock = mpi::detail::lock_mpi();
    MPI_Comm_free(&impl_->comm.comm);
  }
}

bool ProcessGroupMPI::is_broken() const { return impl_->state.broken(); }

std::string ProcessGroupMPI::broken_reason() const { return impl_->state.reason(); }

void ProcessGroupMPI::check_device(const std::string& op, const Tensor& t) const {
  EMBER_CHECK_T(ValueError, t.device().is_cpu(), who(), ": ", op, ": the mpi backend takes CPU tensors, got one on ",
                t.device(), " (use the nccl backend, or copy to the CPU)");
}

namespace {
std::shared_ptr<Work> enqueue(ProcessGroupMPI::Impl& impl, const OpInfo& info, Task task) {
  task.work = std::make_shared<Work>(info.description);
  task.description = info.description;
  auto work = task.work;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(impl.mutex);
    if (!impl.state.broken()) {
      impl.queue.push_back(std::move(task));
      queued = true;
    }
  }
  if (!queued) {
    work->finish(impl.state.not_run(info.description));
    return work;
  }
  impl.cv.notify_one();
  return work;
}


// A collective: `body` runs on the worker, to the end, with the group's communicator.
std::shared_ptr<Work> enqueue_collective(ProcessGroupMPI::Impl& impl, const OpInfo& info,
                                         std::function<void(const mpi::Comm&)> body) {
  Task t;
  t.run = [comm = &impl.comm, body = std::move(body)] { body(*comm); };
  return enqueue(impl, info, std::move(t));
}

// A send or recv: `post` posts its requests on the worker, which then tests them between
// collectives; `tensors` stay alive until they complete.
std::shared_ptr<Work> enqueue_p2p(ProcessGroupMPI::Impl& impl, const OpInfo& info, std::vector<Tensor> tensors,
                                  bool is_recv, std::function<std::vector<MPI_Request>(const mpi::Comm&)> post) {
  Task t;
  t.tensors = std::move(tensors);
  t.is_recv = is_recv;
  t.post = [comm = &impl.comm, post = std::move(post)] { return post(*comm); };
  return enqueue(impl, info, std::move(t));
}
}  // namespace

std::shared_ptr<Work> ProcessGroupMPI::all_reduce_impl(const OpInfo& info, std::vector<Tensor> tensors, ReduceOp op) {
  return enqueue_collective(*impl_, info, [info, tensors, op](const mpi::Comm& c) mutable {
    mpi::all_reduce(c, info, tensors, op);
  });
}

std::shared_ptr<Work> ProcessGroupMPI::broadcast_impl(const OpInfo& info, std::vector<Tensor> tensors, int root) {
  return enqueue_collective(*impl_, info, [info, tensors, root](const mpi::Comm& c) mutable {
    mpi::broadcast(c, info, tensors, root);
  });
}

std::shared_ptr<Work> ProcessGroupMPI::reduce_impl(const OpInfo& info, std::vector<Tensor> tensors, int root,
                                                   ReduceOp op) {
  return enqueue_collective(*impl_, info, [info, tensors, root, op](const mpi::Comm& c) mutable {
    mpi::reduce(c, info, tensors, root, op);
  });
}

std::shared_ptr<Work> ProcessGroupMPI::all_gather_impl(const OpInfo& info, std::vector<Tensor> outputs, Tensor input) {
  return enqueue_collective(*impl_, info, [info, outputs, input](const mpi::Comm& c) mutable {
    mpi::all_gather(c, info, outputs, input);
  });
}

std::shared_ptr<Work> ProcessGroupMPI::reduce_scatter_impl(const OpInfo& info, Tensor output,
                                                           std::vector<Tensor> inputs, ReduceOp op) {
  return enqueue_collective(*impl_, info, [info, output, inputs, op](const mpi::Comm& c) mutable {
    mpi::reduce_scatter(c, info, output, inputs, op);
  });
}

std::shared_ptr<Work> ProcessGroupMPI::barrier_impl(const OpInfo& info) {
  return enqueue_collective(*impl_, info, [info](const mpi::Comm& c) { mpi::barrier(c, info); });
}

std::shared_ptr<Work> ProcessGroupMPI::send_impl(const OpInfo& info, std::vector<Tensor> tensors, int dst, int tag) {
  return enqueue_p2p(*impl_, info, tensors, /*is_recv=*/false,
                     [info, tensors, dst, tag](const mpi::Comm& c) mutable {
                       return mpi::isend(c, info, tensors, dst, tag);
                     });
}

std::shared_ptr<Work> ProcessGroupMPI::recv_impl(const OpInfo& info, std::vector<Tensor> tensors, int src, int tag) {
  return enqueue_p2p(*impl_, info, tensors, /*is_recv=*/true,
                     [info, tensors, src, tag](const mpi::Comm& c) mutable {
                       return mpi::irecv(c, info, tensors, src, tag);
                     });
}

namespace mpi {

std::vector<uint8_t> broadcast_bytes(std::vector<uint8_t> bytes, size_t num_bytes) {
  detail::ensure_initialized();
  bytes.resize(num_bytes);
  auto lock = detail::lock_mpi();
  EMBER_MPI_CHECK(MPI_Bcast(bytes.data(), static_cast<int>(num_bytes), MPI_BYTE, 0, MPI_COMM_WORLD),
                  std::string("mpi: broadcast of the nccl unique id"));
  return bytes;
}

int world_rank() {
  detail::ensure_initialized();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

}  // namespace mpi

}  // namespace ember::parallel
