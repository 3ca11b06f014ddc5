// The intra-op thread pool: num_threads - 1 persistent workers plus the calling thread.
//
// Note [Thread pool concurrency]
// One user thread at a time drives the pool (Pool::use_mu_, taken with try_lock). A second
// user thread that calls parallel_for while the pool is busy (DataParallel replicas on cpu:0
// and cpu:1, two autograd engine threads) runs its loop inline on its own thread instead of
// waiting: it never blocks, so it can never deadlock, and the two callers still run in
// parallel. A parallel_for inside a chunk (on a worker or on the caller) also runs inline.
//
// Note [Thread pool wake-ups]
// A worker joins a task only if it wakes while the task is still posted (task_, under mu_), and
// the caller waits only for the workers that joined. The caller takes chunks too, so when a
// worker is slow to wake (a loaded machine, where a sleeping thread may wait a scheduler tick
// or more) the caller runs the remaining chunks itself and returns without waiting for that
// worker; the task is withdrawn under mu_ first, so a late worker never sees it. Waiting for
// every worker to check in instead would make the caller's latency that of the slowest wake-up,
// which for short memory-bound loops costs more than the extra threads gain.
//
// Note [Thread pool and fork]
// After fork() only the forking thread exists in the child; the parent's workers are gone and
// the pool's mutexes may be held by threads that no longer exist. The atfork child handler
// therefore abandons the inherited pool without touching it (it is leaked on purpose: its
// destructor would join dead threads) and the child's first parallel_for builds a new one.
// The global config mutex is taken in the prepare handler so it is consistent in the child.
#include "core/thread_pool.h"

#include "core/cpu_affinity.h"
#include "core/deterministic.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/env.h"
#include "core/error.h"

extern "C" void openblas_set_num_threads(int);

namespace ember {

namespace {

thread_local bool t_in_parallel_region = false;

struct RegionGuard {
  bool saved;
  RegionGuard() : saved(t_in_parallel_region) { t_in_parallel_region = true; }
  ~RegionGuard() { t_in_parallel_region = saved; }
};

// One parallel_for invocation; lives on the caller's stack until every worker checked in.
struct Task {
  const std::function<void(int64_t, int64_t)>* f = nullptr;
  int64_t begin = 0;
  int64_t end = 0;
  int64_t chunk_size = 0;
  int64_t num_chunks = 0;
  std::atomic<int64_t> next_chunk{0};
  int active_workers = 0;  // guarded by Pool::mu_: workers that joined and have not finished
  std::mutex error_mu;
  std::exception_ptr error;  // guarded by error_mu: the first exception thrown by a chunk

  void run_chunks() {
    RegionGuard guard;
    for (;;) {
      int64_t c = next_chunk.fetch_add(1, std::memory_order_relaxed);
      if (c >= num_chunks) return;
      int64_t lo = begin + c * chunk_size;
      int64_t hi = lo + chunk_size < end ? lo + chunk_size : end;
      try {
        (*f)(lo, hi);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        next_chunk.store(num_chunks, std::memory_order_relaxed);  // skip the chunks not started
      }
    }
  }
};

class Pool {
 public:
  explicit Pool(int num_threads) : num_threads_(num_threads) {
    workers_.reserve(static_cast<size_t>(num_threads - 1));
    for (int i = 0; i < num_threads - 1; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int num_threads() const { return num_threads_; }

  /// Runs `f` over [begin, end) in `num_chunks` chunks. Returns false (having done nothing)
  /// when another user thread is driving the pool. See Note [Thread pool concurrency].
  bool try_run(int64_t begin, int64_t end, int64_t num_chunks,
               const std::function<void(int64_t, int64_t)>& f) {
    std::unique_lock<std::mutex> use(use_mu_, std::try_to_lock);
    if (!use.owns_lock()) return false;
    Task task;
    task.f = &f;
    task.begin = begin;
    task.end = end;
    task.num_chunks = num_chunks;
    task.chunk_size = (end - begin + num_chunks - 1) / num_chunks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      task_ = &task;
      workers_needed_ = static_cast<int>(num_chunks - 1);
      ++generation_;
    }
    work_cv_.notify_all();
    task.run_chunks();
    {
      // See Note [Thread pool wake-ups]: withdraw the task, then wait for the workers that joined.
      std::unique_lock<std::mutex> lock(mu_);
      task_ = nullptr;
      done_cv_.wait(lock, [&] { return task.active_workers == 0; });
    }
    if (task.error) std::rethrow_exception(task.error);
    return true;
  }

 private:
  void worker_loop(int id) {
    uint64_t seen = 0;
    for (;;) {
      Task* task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        if (id >= workers_needed_ || task_ == nullptr) continue;  // withdrawn: the caller finished it
        task = task_;
        ++task->active_workers;
      }
      task->run_chunks();
      std::lock_guard<std::mutex> lock(mu_);
      // Once mu_ is released the caller may return and destroy `task`.
      if (--task->active_workers == 0) done_cv_.notify_one();
    }
  }

  const int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex use_mu_;  // held by the user thread driving the pool
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  bool stop_ = false;        // guarded by mu_
  uint64_t generation_ = 0;  // guarded by mu_; bumped once per dispatched task
  Task* task_ = nullptr;     // guarded by mu_; null once the caller withdrew it (Note [Thread pool wake-ups])
  int workers_needed_ = 0;   // guarded by mu_: workers with id < this run the current task
};

// Process-wide configuration. Leaked: workers may outlive static destruction.
struct Config {
  std::mutex mu;
  int num_threads = 0;         // guarded by mu; 0 = not decided yet
  std::shared_ptr<Pool> pool;  // guarded by mu; null until first needed
};

Config& config() {
  static Config* c = [] {
    auto* cfg = new Config();
    pthread_atfork(
        [] { config().mu.lock(); },
        [] { config().mu.unlock(); },
        [] {
          Config& c = config();
          // See Note [Thread pool and fork]: never destroy the parent's pool here.
          new std::shared_ptr<Pool>(std::move(c.pool));
          c.pool = nullptr;
          c.mu.unlock();
        });
    return cfg;
  }();
  return *c;
}

int default_num_threads() {
  if (const auto n = env::integer("EMBER_NUM_THREADS", 1, 4096)) return static_cast<int>(*n);
  return available_cpu_count();  // what this process may run on (ember-run binds ranks)
}

// Caller holds c.mu.
int num_threads_locked(Config& c) {
  if (c.num_threads == 0) c.num_threads = default_num_threads();
  return c.num_threads;
}

}  // namespace

void set_num_threads(int num_threads) {
  EMBER_CHECK_T(ValueError, num_threads >= 1, "set_num_threads: expected a thread count >= 1, got ",
                num_threads);
  std::shared_ptr<Pool> old;
  {
    Config& c = config();
    std::lock_guard<std::mutex> lock(c.mu);
    c.num_threads = num_threads;
    if (c.pool && c.pool->num_threads() != num_threads) old = std::move(c.pool);
  }
  // `old` is joined here unless a parallel_for still holds it (then the last user joins it).
  old.reset();
  openblas_set_num_threads(are_deterministic_algorithms_enabled() ? 1 : num_threads);  // Note [Deterministic GEMM]
}

void detail::apply_blas_threads() { openblas_set_num_threads(are_deterministic_algorithms_enabled() ? 1 : get_num_threads()); }

int get_num_threads() {
  Config& c = config();
  std::lock_guard<std::mutex> lock(c.mu);
  return num_threads_locked(c);
}

bool in_parallel_region() { return t_in_parallel_region; }

void parallel_for(int64_t begin, int64_t end, int64_t grain_size,
                  const std::function<void(int64_t, int64_t)>& f) {
  if (begin >= end) return;
  int64_t range = end - begin;
  if (grain_size < 1) grain_size = 1;
  if (range <= grain_size || t_in_parallel_region) {
    f(begin, end);
    return;
  }
  std::shared_ptr<Pool> pool;
  int64_t num_chunks;
  {
    Config& c = config();
    std::lock_guard<std::mutex> lock(c.mu);
    int n = num_threads_locked(c);
    num_chunks = std::min<int64_t>(n, (range + grain_size - 1) / grain_size);
    if (num_chunks > 1) {
      if (!c.pool) c.pool = std::make_shared<Pool>(n);
      pool = c.pool;
    }
  }
  if (!pool || !pool->try_run(begin, end, num_chunks, f)) f(begin, end);
}

}  // namespace ember
