// Work: the handle an asynchronous ProcessGroup operation returns. The backend's worker
// finishes it exactly once (success or an exception); any thread may wait on it, poll it,
// or read its exception, concurrently. See parallel/README.md for what each error means
// for the group.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error_code.h"

namespace ember::parallel {

class Work {
 public:
  /// wait() without a limit of its own: the operation's own deadline (the group's
  /// timeout) still bounds it.
  static constexpr int64_t kNoTimeout = -1;

  /// `description` names the backend, the rank and the operation, e.g.
  /// "tcp rank 0/4: all_reduce #3"; it starts every error message.
  explicit Work(std::string description);
  virtual ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  /// Blocks until the operation finished, then rethrows its error if it failed (a
  /// DistributedError naming rank, peer and operation). With timeout_ms >= 0, throws
  /// TimeoutError when it is still running after timeout_ms milliseconds; the operation
  /// goes on (see parallel/README.md), and wait may be called again.
  virtual void wait(int64_t timeout_ms = kNoTimeout);
  /// True once the operation finished, successfully or not; never blocks.
  virtual bool is_completed();
  /// True once finished without an error.
  bool is_success();
  /// The error the operation failed with (a fresh copy with the same message and ember
  /// type, see core/error_code.h; any other exception comes back as Error), or null (also
  /// while it is still running).
  std::exception_ptr exception();
  const std::string& description() const { return description_; }

  /// Runs `callback(*this)` once the work finished: on the finishing thread, before any
  /// wait() returns, or at once on the calling thread when it already has. A callback must
  /// not throw; it may query the Work (is_completed() is true, wait() returns at once).
  void add_callback(std::function<void(Work&)> callback);

  /// Backends: marks the work finished (error null means success) and wakes the waiters.
  /// Later calls are ignored. The error is kept as its type and message, and every waiter
  /// gets its own copy: no exception object is shared between threads.
  void finish(std::exception_ptr error = nullptr);

 protected:
  /// For subclasses whose completion comes from elsewhere (a CUDA event): waits for
  /// finish() like wait() does, but returns false on timeout instead of throwing.
  bool wait_finished(int64_t timeout_ms);
  [[noreturn]] void throw_timeout(int64_t timeout_ms) const;

 private:
  const std::string description_;
  std::mutex mutex_;
  std::condition_variable cv_;                          // guarded by mutex_
  bool done_ = false;                                   // guarded by mutex_: finished
  bool released_ = false;                               // guarded by mutex_: callbacks ran, waiters may go
  std::thread::id finishing_thread_;                    // guarded by mutex_
  // The failure, as its type, message and where().
  bool failed_ = false;                                 // guarded by mutex_
  ErrorDescription error_;                              // guarded by mutex_
  std::exception_ptr make_error_locked() const;
  std::vector<std::function<void(Work&)>> callbacks_;   // guarded by mutex_
};

}  // namespace ember::parallel
