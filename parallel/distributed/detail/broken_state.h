// BrokenState: whether a process group is broken, and why; the one place the three backends
// (tcp, mpi, nccl) keep that and word the errors of operations a broken group does not run.
// The first break wins and is final (parallel/README.md: "Which errors leave the group
// usable"). Thread-safe.
#pragma once
#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <string>

namespace ember::parallel::detail {

class BrokenState {
 public:
  /// `on_break` runs once, on the thread whose break_group() broke the group, after the
  /// reason is recorded (tcp shuts its sockets down there).
  explicit BrokenState(std::function<void()> on_break = {}) : on_break_(std::move(on_break)) {}
  BrokenState(const BrokenState&) = delete;
  BrokenState& operator=(const BrokenState&) = delete;

  bool broken() const { return broken_.load(std::memory_order_acquire); }
  /// The first break's reason; empty while the group is usable.
  std::string reason() const;
  /// Returns true when this call broke the group, false when it already was.
  bool break_group(const std::string& reason);

  /// "<description> not run: the process group is broken: <reason>", as a DistributedError
  /// carrying where it was made: the error of an operation that reached a broken group.
  std::exception_ptr not_run(const std::string& description) const;
  /// Throws not_run(description) when the group is broken.
  void check_not_broken(const std::string& description) const;

 private:
  std::function<void()> on_break_;
  std::atomic<bool> broken_{false};
  mutable std::mutex mutex_;
  std::string reason_;  // guarded by mutex_
};

}  // namespace ember::parallel::detail
