// DataParallel's deterministic option (Note [DataParallel shards] in parallel/data_parallel.cpp):
// a few Adam steps over 8 shards give bit-identical parameters over 1, 2, 3 and 4 CPU devices
// (3 devices holding 3 + 3 + 2 shards) and with 1 or 2 intra-op threads; with average_shards
// the same bits as a group-less DeterministicReducer running the shards one after another in
// one process; the result equals the ordinary DataParallel gradient within float tolerance;
// bad options and batches are typed errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "core/ops/native.h"
#include "core/thread_pool.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/optim/adam.h"
#include "parallel/data_parallel.h"
#include "parallel/deterministic_reducer.h"
#include "tests/parallel/deterministic_shards_util.h"
#include "tests/support/error_text.h"

using namespace ember;
using parallel::DataParallel;
using parallel::DataParallelOptions;
using namespace parallel::test;  // Net, rows, kShards, same_bits, train_shard_losses (deterministic_shards_util.h)
using ::testing::HasSubstr;

namespace {

std::vector<Device> cpus(int n) {
  std::vector<Device> d;
  for (int i = 0; i < n; ++i) d.push_back(Device::cpu(i));
  return d;
}

Bits values(const std::vector<Tensor>& ts) {
  Bits out;
  for (const auto& t : ts) out.push_back(t.to_vector<float>());
  return out;
}

// `steps` Adam steps of a loss over the gathered outputs, DataParallel over `devices` CPU
// devices (deterministic or not); returns the parameters.
Bits train_gathered(int devices, bool deterministic, int steps, int threads = 1) {
  manual_seed(7);
  auto net = std::make_shared<Net>();
  const int before = get_num_threads();
  set_num_threads(threads);
  DataParallelOptions o;
  o.devices = cpus(devices);
  o.deterministic = deterministic;
  o.num_shards = kShards;
  DataParallel<Net> dp(net, o);
  optim::Adam adam(net->parameters(), optim::AdamOptions(0.01));
  for (int s = 0; s < steps; ++s) {
    adam.zero_grad();
    nn::functional::mse_loss(dp(rows(100, s, kShards * kShardRows, 6)), rows(900, s, kShards * kShardRows, 3))
        .backward();
    adam.step();
  }
  set_num_threads(before);
  return values(net->parameters());
}

TEST(DataParallelDeterministic, SameBitsOnEveryDeviceListAndThreadCount) {
  const Bits one = train_gathered(1, true, 4);
  for (int d : {2, 3, 4}) EXPECT_TRUE(same_bits(one, train_gathered(d, true, 4))) << d << " devices";
  EXPECT_TRUE(same_bits(one, train_gathered(3, true, 4, 2))) << "3 devices, 2 intra-op threads";
}

TEST(DataParallelDeterministic, AveragedShardsEqualTheOneProcessReducerBits) {
  const Bits reducer = train_shard_losses({}, 4);
  for (int d : {1, 2, 3, 4}) EXPECT_TRUE(same_bits(reducer, train_shard_losses(cpus(d), 4))) << d << " devices";
}

TEST(DataParallelDeterministic, MatchesTheOrdinaryGradientWithinTolerance) {
  const Bits det = train_gathered(3, true, 1), plain = train_gathered(3, false, 1);
  EXPECT_FALSE(same_bits(det, train_gathered(1, true, 0))) << "the step changed nothing";
  ASSERT_EQ(det.size(), plain.size());
  for (size_t i = 0; i < det.size(); ++i) {
    for (size_t j = 0; j < det[i].size(); ++j) ASSERT_NEAR(det[i][j], plain[i][j], 1e-5) << i << " " << j;
  }
}

TEST(DataParallelDeterministic, BadOptionsAndBatchesAreTypedErrors) {
  auto net = std::make_shared<Net>();
  DataParallelOptions o;
  o.devices = cpus(2);
  o.deterministic = true;
  o.num_shards = 0;
  EXPECT_THROW(DataParallel<Net>(net, o), ValueError);
  o.num_shards = 4;
  DataParallel<Net> dp(net, o);
  const std::string err = support::error_of<ValueError>([&] { dp(rows(1, 0, 6, 6)); });
  EXPECT_THAT(err, HasSubstr("the batch has 6 samples"));
  EXPECT_THAT(err, HasSubstr("expected a positive multiple of num_shards 4"));
}

}  // namespace
