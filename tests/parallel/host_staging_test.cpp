// Host staging (Note [Host staging]) leaves CPU tensors alone: no copies, no waits, so the tcp
// backend's CPU path is unchanged. The CUDA side is process_group_tcp_cuda_test (gpu label).
#include <gtest/gtest.h>

#include <vector>

#include "core/ops/factory.h"
#include "parallel/distributed/detail/host_staging.h"

namespace ember::parallel::detail {
namespace {

TEST(HostStaging, CpuTensorsAreTheirOwnHostCopies) {
  std::vector<Tensor> ts = {ones({3}), zeros({0}), ones({2}, TensorOptions().device(Device::cpu(1)))};
  EXPECT_FALSE(needs_staging(ts));
  std::vector<Tensor> host = host_copies(ts);
  ASSERT_EQ(host.size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) EXPECT_EQ(host[i].impl(), ts[i].impl()) << i;
}

TEST(HostStaging, CopyBackLeavesCpuTensorsAsTheCollectiveWroteThem) {
  std::vector<Tensor> ts = {ones({3})};
  std::vector<Tensor> host = host_copies(ts);
  wait_for_producers(ts);
  host[0].data_ptr<float>()[1] = 5.0f;  // the collective writes in place
  copy_back(ts, host);
  EXPECT_EQ(ts[0].to_vector<float>(), (std::vector<float>{1.0f, 5.0f, 1.0f}));
}

}  // namespace
}  // namespace ember::parallel::detail
