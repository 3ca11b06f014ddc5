// --ddp on GPUs (rnn_dp, word_lm: examples/common/distributed_job.h), the parts decided without one: which backend a rank uses when --backend
// is not given (nccl wherever GPUs are visible, mpirun included; the CPU defaults unchanged) and
// which device a local rank trains on (local_rank % device count).
#include <gtest/gtest.h>

#include "core/error.h"
#include "examples/common/distributed_job.h"

namespace ember_examples {
namespace {

TEST(RnnDpDeviceChoice, GpusVisibleMakeNcclTheDefaultUnderEveryLauncher) {
  EXPECT_EQ(default_ddp_backend("", /*under_mpirun=*/true, 2), "nccl");
  EXPECT_EQ(default_ddp_backend("", /*under_mpirun=*/true, 1), "nccl");
  EXPECT_EQ(default_ddp_backend("", /*under_mpirun=*/false, 4), "nccl");
}

TEST(RnnDpDeviceChoice, WithoutGpusTheDefaultStaysMpiUnderMpirunAndTcpElsewhere) {
  EXPECT_EQ(default_ddp_backend("", /*under_mpirun=*/true, 0), "mpi");
  EXPECT_EQ(default_ddp_backend("", /*under_mpirun=*/false, 0), "tcp");
}

TEST(RnnDpDeviceChoice, AnExplicitBackendWins) {
  EXPECT_EQ(default_ddp_backend("tcp", true, 2), "tcp");
  EXPECT_EQ(default_ddp_backend("mpi", false, 8), "mpi");
  EXPECT_EQ(default_ddp_backend("nccl", true, 0), "nccl");  // init_process_group then says why not
}

TEST(RnnDpDeviceChoice, LocalRankWrapsOverTheVisibleGpus) {
  EXPECT_EQ(ddp_device(0, 2), ember::Device::cuda(0));
  EXPECT_EQ(ddp_device(3, 2), ember::Device::cuda(1));
  // Per-rank CUDA_VISIBLE_DEVICES leaves each rank one device: every local rank uses cuda:0.
  EXPECT_EQ(ddp_device(5, 1), ember::Device::cuda(0));
  EXPECT_EQ(ddp_device(2, 0), ember::Device::cpu(0));
}

TEST(RnnDpDeviceChoice, NegativeLocalRankIsAValueError) {
  EXPECT_THROW(ddp_device(-1, 2), ember::ValueError);
}

}  // namespace
}  // namespace ember_examples
