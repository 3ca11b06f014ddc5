// The nccl backend's device-neutral decisions (parallel/distributed/detail/): the device a rank
// takes from its local rank, and a non-blocking call settling against its deadline. Both are
// regressions of issue 16's review: LOCAL_RANK was used as the device index unmodified (a rank
// shown only its own GPU by CUDA_VISIBLE_DEVICES asked for device 3 of 1), and an init still in
// progress at its deadline was taken for a success.
#include <gtest/gtest.h>

#include <chrono>

#include "core/error.h"
#include "parallel/distributed/detail/call_settle.h"
#include "parallel/distributed/detail/local_device.h"

namespace ember::parallel::detail {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

TEST(LocalDeviceIndex, IsLocalRankModuloTheVisibleDevices) {
  EXPECT_EQ(local_device_index(3, 1), 0);  // CUDA_VISIBLE_DEVICES=3: the one GPU it sees
  EXPECT_EQ(local_device_index(3, 4), 3);
  EXPECT_EQ(local_device_index(5, 4), 1);  // more ranks than GPUs on the node share them
  EXPECT_EQ(local_device_index(0, 8), 0);
  EXPECT_EQ(local_device_index(std::nullopt, 2), 0);
}

TEST(LocalDeviceIndex, NoDeviceOrNegativeRankIsAnError) {
  EXPECT_THROW(local_device_index(0, 0), DeviceError);  // as every missing device (core/device.h)
  EXPECT_THROW(local_device_index(-1, 2), ValueError);
}

TEST(SettleUntil, DoneAndFailedReturnAtOnce) {
  int polls = 0;
  auto poll = [&] { ++polls; return CallState::kInProgress; };
  EXPECT_EQ(settle_until(CallState::kDone, Clock::now() + milliseconds(1000), poll), CallState::kDone);
  EXPECT_EQ(settle_until(CallState::kFailed, Clock::now() + milliseconds(1000), poll), CallState::kFailed);
  EXPECT_EQ(polls, 0);
}

TEST(SettleUntil, PollsUntilTheCallSettles) {
  int polls = 0;
  auto poll = [&] { return ++polls < 5 ? CallState::kInProgress : CallState::kDone; };
  EXPECT_EQ(settle_until(CallState::kInProgress, Clock::now() + milliseconds(60'000), poll, std::chrono::microseconds(1)),
            CallState::kDone);
  EXPECT_EQ(polls, 5);
  polls = 0;
  auto fails = [&] { return ++polls < 3 ? CallState::kInProgress : CallState::kFailed; };
  EXPECT_EQ(settle_until(CallState::kInProgress, Clock::now() + milliseconds(60'000), fails, std::chrono::microseconds(1)),
            CallState::kFailed);
}

TEST(SettleUntil, StillInProgressAtTheDeadlineIsReportedAsSuch) {
  // Regression: the caller took this for success. The state machine hands kInProgress back,
  // and ProcessGroupNCCL's init and EMBER_NCCL_CALL turn it into a DistributedError.
  int polls = 0;
  auto never = [&] { ++polls; return CallState::kInProgress; };
  const auto deadline = Clock::now() + milliseconds(20);
  EXPECT_EQ(settle_until(CallState::kInProgress, deadline, never, std::chrono::microseconds(100)),
            CallState::kInProgress);
  EXPECT_GE(Clock::now(), deadline);
  EXPECT_GT(polls, 0);
  // A deadline already past: no poll at all.
  polls = 0;
  EXPECT_EQ(settle_until(CallState::kInProgress, Clock::now() - milliseconds(1), never), CallState::kInProgress);
  EXPECT_EQ(polls, 0);
}

}  // namespace
}  // namespace ember::parallel::detail
