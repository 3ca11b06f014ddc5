#include "parallel/distributed/detail/broken_state.h"

#include "core/error.h"

namespace ember::parallel::detail {

std::string BrokenState::reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reason_;
}

bool BrokenState::break_group(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (broken_.load(std::memory_order_relaxed)) return false;
    reason_ = reason;
    broken_.store(true, std::memory_order_release);
  }
  if (on_break_) on_break_();
  return true;
}

std::exception_ptr BrokenState::not_run(const std::string& description) const {
  try {
    EMBER_THROW(DistributedError, description, " not run: the process group is broken: ", reason());
  } catch (...) {
    return std::current_exception();
  }
}

void BrokenState::check_not_broken(const std::string& description) const {
  if (broken()) std::rethrow_exception(not_run(description));
}

}  // namespace ember::parallel::detail
