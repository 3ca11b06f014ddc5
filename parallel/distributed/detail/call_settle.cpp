#include "parallel/distributed/detail/call_settle.h"

#include <thread>

namespace ember::parallel::detail {

CallState settle_until(CallState state, std::chrono::steady_clock::time_point deadline,
                       const std::function<CallState()>& poll, std::chrono::microseconds interval) {
  while (state == CallState::kInProgress) {
    if (std::chrono::steady_clock::now() >= deadline) return CallState::kInProgress;
    std::this_thread::sleep_for(interval);
    state = poll();
  }
  return state;
}

}  // namespace ember::parallel::detail
