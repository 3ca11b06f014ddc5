// Which coalesced copies take comm's NCCL path (Note [NCCL in comm]): decided without a GPU.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "core/config.h"
#include "parallel/detail/comm_nccl.h"

namespace ember::parallel::comm::detail {
namespace {

const Device g0 = Device::cuda(0), g1 = Device::cuda(1), g2 = Device::cuda(2);

TEST(CommNcclChoice, DistinctGpusWithTheRootAmongThemUseNccl) {
  EXPECT_TRUE(should_use_nccl({g0, g1}, g0, kFloat32, true, true));
  EXPECT_TRUE(should_use_nccl({g1, g0, g2}, g2, kBFloat16, true, true));  // any order, any listed root
  EXPECT_TRUE(should_use_nccl({g0, g1}, g1, kInt64, true, true));
}

TEST(CommNcclChoice, MixedOrCpuDevicesTakeThePeerCopyPath) {
  EXPECT_FALSE(should_use_nccl({g0, Device::cpu(0)}, g0, kFloat32, true, true));
  EXPECT_FALSE(should_use_nccl({Device::cpu(0), Device::cpu(1)}, Device::cpu(0), kFloat32, true, true));
}

TEST(CommNcclChoice, OneDeviceARepeatedDeviceOrAnUnlistedRootTakeThePeerCopyPath) {
  EXPECT_FALSE(should_use_nccl({g0}, g0, kFloat32, true, true));
  EXPECT_FALSE(should_use_nccl({g0, g0}, g0, kFloat32, true, true));
  EXPECT_FALSE(should_use_nccl({g0, g1}, g2, kFloat32, true, true));  // e.g. reduce to a third GPU
}

TEST(CommNcclChoice, BoolHasNoNcclTypeAndTakesThePeerCopyPath) {
  EXPECT_FALSE(should_use_nccl({g0, g1}, g0, kBool, true, true));
}

TEST(CommNcclChoice, NoNcclInTheBuildOrEmberCommNccl0TakeThePeerCopyPath) {
  EXPECT_FALSE(should_use_nccl({g0, g1}, g0, kFloat32, /*nccl_built=*/false, true));
  EXPECT_FALSE(should_use_nccl({g0, g1}, g0, kFloat32, true, /*enabled=*/false));
}

TEST(CommNcclChoice, UseNcclFollowsThisBuild) {
  // cpu lists never take it; an all-GPU list does exactly when this build has NCCL.
  EXPECT_FALSE(use_nccl({Device::cpu(0), Device::cpu(1)}, Device::cpu(0), kFloat32));
  EXPECT_EQ(use_nccl({g0, g1}, g0, kFloat32), EMBER_HAVE_NCCL != 0);
}

// Note [NCCL fallback]: a device list whose communicator cannot be made takes the peer-copy path
// for the rest of the process, asked once.
TEST(NcclSupport, AListWhoseCommunicatorFailsIsNotReadyAndIsAskedOnce) {
  int calls = 0;
  NcclSupport support([&](const std::vector<Device>&) {
    ++calls;
    return std::string("ncclCommInitAll failed: unhandled system error");
  });
  testing::internal::CaptureStderr();
  EXPECT_FALSE(support.ready({g0, g1}));
  EXPECT_FALSE(support.ready({g0, g1}));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(support.failure({g0, g1}), "ncclCommInitAll failed: unhandled system error");
  // Reported once, naming the devices, the reason and the fallback.
  EXPECT_NE(err.find("cuda:0,cuda:1"), std::string::npos) << err;
  EXPECT_NE(err.find("unhandled system error"), std::string::npos) << err;
  EXPECT_NE(err.find("peer to peer"), std::string::npos) << err;
  EXPECT_EQ(err.find("cuda:0,cuda:1", err.find("cuda:0,cuda:1") + 1), std::string::npos) << err;
}

TEST(NcclSupport, EachOrderedListIsAskedOnItsOwnAndSuccessIsKept) {
  std::vector<std::vector<Device>> asked;
  NcclSupport support([&](const std::vector<Device>& devices) {
    asked.push_back(devices);
    return devices.size() == 3 ? std::string("no peer access") : std::string();
  });
  testing::internal::CaptureStderr();
  EXPECT_TRUE(support.ready({g0, g1}));
  EXPECT_TRUE(support.ready({g0, g1}));
  EXPECT_TRUE(support.ready({g1, g0}));  // another order is another communicator (rank i is devices[i])
  EXPECT_FALSE(support.ready({g0, g1, g2}));
  testing::internal::GetCapturedStderr();
  ASSERT_EQ(asked.size(), 3u);
  EXPECT_EQ(asked[1], (std::vector<Device>{g1, g0}));
  EXPECT_EQ(support.failure({g0, g1}), "");
  EXPECT_EQ(support.failure({g0, g1, g2}), "no peer access");
}

TEST(NcclSupport, AnInitThatThrowsCountsAsAFailure) {
  NcclSupport support([](const std::vector<Device>&) -> std::string { throw std::runtime_error("cudaErrorNoDevice"); });
  testing::internal::CaptureStderr();
  EXPECT_FALSE(support.ready({g0, g1}));
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(support.failure({g0, g1}), "cudaErrorNoDevice");
}

#if !EMBER_HAVE_NCCL
TEST(NcclSupport, ABuildWithoutNcclIsNeverReady) { EXPECT_FALSE(nccl_ready({g0, g1})); }
#endif

}  // namespace
}  // namespace ember::parallel::comm::detail
