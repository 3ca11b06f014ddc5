// DataParallel and comm across GPUs, in one process: the coalesced broadcast and reduce over
// NCCL (Note [NCCL in comm]) or, for mixed lists and a device listed twice, copies; and the FAQ's
// pattern (inputs on dim 1, lengths on dim 0, total_length) against the same model on one device,
// on cuda:0,cuda:1 and on cuda:0,cuda:0 (two replicas on one GPU, as PyTorch allows). The
// cuda:0,cuda:0 tests need one GPU, the others two; each skips, saying so, without them.
#include <gtest/gtest.h>

#include <vector>

#include "autograd/ops.h"
#include "core/config.h"
#include "nn/optim/adam.h"
#include "parallel/comm.h"
#include "parallel/data_parallel.h"
#include "parallel/detail/comm_nccl.h"
#include "tests/parallel/faq_lstm.h"

namespace ember::parallel {
namespace {

using namespace faq_test;

#define REQUIRE_TWO_GPUS()                                                                                 \
  if (cuda_device_count() < 2)                                                                            \
  GTEST_SKIP() << "needs 2 CUDA devices, found " << cuda_device_count()                                   \
               << " (DataParallel across GPUs, NCCL between them)"

#define REQUIRE_A_GPU() \
  if (cuda_device_count() < 1) GTEST_SKIP() << "needs a CUDA device, found none"

const std::vector<Device> kTwo{Device::cuda(0), Device::cuda(1)};
const std::vector<Device> kTwice{Device::cuda(0), Device::cuda(0)};

TEST(CommTwoGpus, BroadcastCoalescedCopiesEveryBucketToBothGpus) {
  REQUIRE_TWO_GPUS();
  EXPECT_EQ(comm::detail::use_nccl(kTwo, kTwo[0], kFloat32), EMBER_HAVE_NCCL != 0);
  std::vector<Tensor> src{seeded_randn({7, 3}, 1, kTwo[0]), seeded_randn({5}, 2, kTwo[0]),
                          native::to(seeded_randn({4, 4}, 3), kTwo[0], kFloat64)};
  auto out = comm::broadcast_coalesced(src, kTwo, /*buffer_bytes=*/64);  // several buckets per dtype
  ASSERT_EQ(out.size(), 2u);
  for (size_t j = 0; j < src.size(); ++j) {
    EXPECT_EQ(out[1][j].device(), kTwo[1]);
    EXPECT_EQ(out[1][j].dtype(), src[j].dtype());
    expect_near(out[1][j], src[j], 0.0, "tensor " + std::to_string(j));
  }
}

TEST(CommTwoGpus, ReduceAddCoalescedSumsOnTheDestinationGpu) {
  REQUIRE_TWO_GPUS();
  std::vector<std::vector<Tensor>> in(2);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) in[i].push_back(seeded_randn({6, j + 1}, 10 * i + j, kTwo[i]));
  }
  for (const Device& dst : kTwo) {
    auto out = comm::reduce_add_coalesced(in, dst, /*buffer_bytes=*/32);
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(out[j].device(), dst);
      expect_near(out[j], native::add(native::to(in[0][j], Device::cpu(0)), native::to(in[1][j], Device::cpu(0))),
                  1e-6, "tensor " + std::to_string(j));
    }
  }
  // A mixed list (two GPUs and the CPU) takes the peer-copy path and agrees.
  auto mixed = in;
  mixed.push_back({seeded_randn({6, 1}, 30), seeded_randn({6, 2}, 31), seeded_randn({6, 3}, 32)});
  EXPECT_FALSE(comm::detail::use_nccl({kTwo[0], kTwo[1], Device::cpu(0)}, kTwo[0], kFloat32));
  auto out = comm::reduce_add_coalesced(mixed, kTwo[0]);
  expect_near(out[0], native::add(native::add(native::to(in[0][0], Device::cpu(0)), native::to(in[1][0], Device::cpu(0))),
                                  mixed[2][0]),
              1e-6, "mixed");
}

/// The FAQ's pattern on `devices`: input [T, B, 3] scattered on dim 1, lengths on dim 0,
/// outputs gathered on dim 1 on the first device, every replica padding to total_length.
void faq_pattern_matches_one_device(const std::vector<Device>& devices) {
  manual_seed(11);
  auto single = std::make_shared<PackedLstm>(/*batch_first=*/false, /*use_total_length=*/true);
  single->to(devices[0]);
  auto wrapped = single->clone_as();
  DataParallel<PackedLstm> dp(wrapped, devices, devices[0], /*dim=*/1);
  dp.scatter_dims({1, 0});
  optim::Adam opt1(single->parameters(), optim::AdamOptions(1e-2));
  optim::Adam opt2(dp.parameters(), optim::AdamOptions(1e-2));
  for (int step = 0; step < 5; ++step) {
    auto [x_cpu, lengths] = sequence_batch(7, 6, /*batch_first=*/false, 300 + step);
    Tensor x = native::to(x_cpu, devices[0]);
    Tensor target = seeded_randn({6, 7, 2}, 400 + step, devices[0]);
    opt1.zero_grad();
    Tensor ref = single->forward(x, lengths);
    mean(pow(sub(ref, target), 2.0)).backward();
    opt2.zero_grad();
    Tensor out = dp(x, lengths);
    EXPECT_EQ(out.device(), devices[0]);
    expect_near(out, ref, kTol, "output at step " + std::to_string(step));
    mean(pow(sub(out, target), 2.0)).backward();
    auto a = single->named_parameters(), b = wrapped->named_parameters();
    for (size_t j = 0; j < a.size(); ++j) expect_near(b[j].second.grad(), a[j].second.grad(), kTol, a[j].first);
    opt1.step();
    opt2.step();
  }
}

TEST(DataParallelTwoGpus, FaqPatternMatchesOneDevice) {
  REQUIRE_TWO_GPUS();
  faq_pattern_matches_one_device(kTwo);
}

TEST(DataParallelOneGpu, FaqPatternOnTwoReplicasOfOneGpuMatchesOneDevice) {
  REQUIRE_A_GPU();
  faq_pattern_matches_one_device(kTwice);
}

TEST(CommOneGpu, BroadcastAndReduceCoalescedWithTheGpuListedTwice) {
  REQUIRE_A_GPU();
  EXPECT_FALSE(comm::detail::use_nccl(kTwice, kTwice[0], kFloat32)) << "NCCL needs distinct devices";
  std::vector<Tensor> src{seeded_randn({7, 3}, 1, kTwice[0]), native::to(seeded_randn({4, 4}, 3), kTwice[0], kFloat64)};
  auto out = comm::broadcast_coalesced(src, kTwice, /*buffer_bytes=*/64);
  ASSERT_EQ(out.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    for (size_t j = 0; j < src.size(); ++j) {
      EXPECT_EQ(out[i][j].device(), kTwice[0]);
      expect_near(out[i][j], src[j], 0.0, "copy " + std::to_string(i) + " of tensor " + std::to_string(j));
    }
  }
  std::vector<std::vector<Tensor>> in(2);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) in[i].push_back(seeded_randn({6, j + 1}, 10 * i + j, kTwice[0]));
  }
  auto sum = comm::reduce_add_coalesced(in, kTwice[0], /*buffer_bytes=*/32);
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(sum[j].device(), kTwice[0]);
    expect_near(sum[j], native::add(native::to(in[0][j], Device::cpu(0)), native::to(in[1][j], Device::cpu(0))), 1e-6,
                "sum of tensor " + std::to_string(j));
  }
}

}  // namespace
}  // namespace ember::parallel
