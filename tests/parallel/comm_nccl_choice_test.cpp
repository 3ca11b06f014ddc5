// Which coalesced copies take comm's NCCL path (Note [NCCL in comm]): decided without a GPU.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ember::parallel::comm::detail
