#include "parallel/distributed/work.h"

#include <chrono>
#include <stdexcept>
#include <tuple>

#include "core/error.h"

namespace ember::parallel {

Work::Work(std::string description) : description_(std::move(description)) {}

Work::~Work() = default;

bool Work::wait_finished(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  // A callback (running on the finishing thread) waiting on its own work returns at once.
  auto ready = [&] { return released_ || (done_ && finishing_thread_ == std::this_thread::get_id()); };
  if (timeout_ms < 0) {
    cv_.wait(lock, ready);
    return true;
  }
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready);
}

void Work::throw_timeout(int64_t timeout_ms) const {
  EMBER_THROW(TimeoutError, description_, ": wait timed out after ", timeout_ms,
              " ms; the operation is still running (wait again, or see parallel/README.md)");
}

std::exception_ptr Work::make_error_locked() const {
  return failed_ ? make_exception(error_.code, error_.message, error_.where) : nullptr;
}

void Work::wait(int64_t timeout_ms) {
  if (!wait_finished(timeout_ms)) throw_timeout(timeout_ms);
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error = make_error_locked();
  }
  if (error) std::rethrow_exception(error);
}

bool Work::is_completed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

bool Work::is_success() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_ && !failed_;
}

std::exception_ptr Work::exception() {
  std::lock_guard<std::mutex> lock(mutex_);
  return make_error_locked();
}

void Work::add_callback(std::function<void(Work&)> callback) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!released_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
  }
  callback(*this);
}

void Work::finish(std::exception_ptr error) {
  const bool failed = error != nullptr;
  ErrorDescription description;
  if (failed) {
    description = describe_exception(error);
    if (description.code == ErrorCode::kUnknown) {
      description.message = description_ + " failed with a non-standard exception";
    }
    error = nullptr;
  }
  std::vector<std::function<void(Work&)>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;
    done_ = true;
    failed_ = failed;
    error_ = std::move(description);
    finishing_thread_ = std::this_thread::get_id();
  }
  // Callbacks added while these run are run here too, before the waiters are released.
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (callbacks_.empty()) {
        released_ = true;
        break;
      }
      callbacks.swap(callbacks_);
    }
    for (auto& cb : callbacks) cb(*this);
    callbacks.clear();
  }
  cv_.notify_all();
}

}  // namespace ember::parallel
