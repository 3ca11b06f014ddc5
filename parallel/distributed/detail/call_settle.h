// How a call on a non-blocking NCCL communicator settles against its deadline (used by
// parallel/distributed/nccl/detail/nccl_types.cpp for ncclCommInitRank and every enqueue).
// Device-neutral, so the CPU tests drive it with a fake poll. Thread-safe.
#pragma once
#include <chrono>
#include <functional>

namespace ember::parallel::detail {

/// Where a call on a non-blocking communicator stands.
enum class CallState { kDone, kInProgress, kFailed };

/// Polls `poll` (the call's state now) every `interval` while it is kInProgress and the deadline
/// has not passed; returns the last state. kInProgress back means the deadline passed with the
/// call unfinished: a timeout, which callers must report as a failure, never take as success.
CallState settle_until(CallState state, std::chrono::steady_clock::time_point deadline,
                       const std::function<CallState()>& poll,
                       std::chrono::microseconds interval = std::chrono::microseconds(50));

}  // namespace ember::parallel::detail
