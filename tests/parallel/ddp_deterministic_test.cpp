// DistributedDataParallel's deterministic option (Note [World-size invariance] in
// parallel/deterministic_reducer.cpp), ranks as threads over tcp: a few Adam steps over 8
// virtual shards give bit-identical parameters at world sizes 1, 2, 3 and 4 (3 ranks holding
// 3 + 3 + 2 shards) and for 1 or 2 intra-op threads, where the default mode's bits change with
// the world size; the result is the large-batch gradient within float tolerance; a wrong shard
// count, too few shards and comm hooks are typed errors; NaN gradients come out NaN. Uneven
// inputs under join(): shards 4-7 run out after 3 of 5 steps, and 2 ranks (the second joins
// early) give the same bits as 4 ranks (the last two join early), on every rank, within float
// tolerance of the one-process gradient of the shards that ran.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <mutex>

#include "core/ops/native.h"
#include "core/thread_pool.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/optim/adam.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/zero_redundancy_optimizer.h"
#include "tests/parallel/deterministic_shards_util.h"
#include "tcp_groups.h"
#include "tests/support/error_text.h"

using namespace ember;
using parallel::DistributedDataParallel;
using parallel::DistributedDataParallelOptions;
using namespace parallel::test;  // Net, rows, kShards, same_bits (deterministic_shards_util.h)
using ::testing::HasSubstr;

namespace {

std::shared_ptr<Net> make_net() {
  static std::mutex mu;  // manual_seed + initialization through the process-wide generator
  std::lock_guard<std::mutex> lk(mu);
  manual_seed(7);
  return std::make_shared<Net>();
}

// Shards [first, last) of `world` ranks over kShards: contiguous, sizes differing by at most one.
std::pair<int, int> shard_range(int rank, int world) { return {rank * kShards / world, (rank + 1) * kShards / world}; }

// DDP's options for kShards shards, deterministic or not.
DistributedDataParallelOptions sharded(bool deterministic) {
  DistributedDataParallelOptions o;
  o.deterministic = deterministic;
  o.num_shards = kShards;
  return o;
}

// The backward of each of shards [first, last) of rows x -> y, one after another; only the last
// synchronizes (the others under no_sync()).
void backward_shards(DistributedDataParallel<Net>& ddp, const Tensor& x, const Tensor& y, int first, int last) {
  for (int k = first; k < last; ++k) {
    auto run = [&] {
      Tensor out = ddp(native::narrow(x, 0, k * kShardRows, kShardRows));
      nn::functional::mse_loss(out, native::narrow(y, 0, k * kShardRows, kShardRows)).backward();
    };
    if (k + 1 < last) {
      auto guard = ddp.no_sync();
      run();
    } else {
      run();
    }
  }
}

// Trains `steps` Adam steps on every rank; returns rank 0's parameters, as raw bits.
std::vector<std::vector<float>> train(int world, bool deterministic, int steps, int threads = 1, bool zero = false) {
  auto groups = parallel::test::make_groups(world, parallel::test::tcp_options(20000, true));
  std::vector<std::vector<float>> out;
  std::mutex out_mu;
  const int before = get_num_threads();
  set_num_threads(threads);
  parallel::test::on_ranks(groups, [&](parallel::ProcessGroupTCP& pg) {
    auto net = make_net();
    std::shared_ptr<parallel::ProcessGroup> group(&pg, [](parallel::ProcessGroup*) {});
    DistributedDataParallel<Net> ddp(net, group, sharded(deterministic));
    std::unique_ptr<parallel::ZeroRedundancyOptimizer> zero_opt;
    std::unique_ptr<optim::Adam> adam;
    if (zero) {
      zero_opt = std::make_unique<parallel::ZeroRedundancyOptimizer>(net->parameters(), group, [](std::vector<Tensor> p) {
        return std::make_unique<optim::Adam>(p, optim::AdamOptions(0.01));
      });
    } else {
      adam = std::make_unique<optim::Adam>(net->parameters(), optim::AdamOptions(0.01));
    }
    const auto [first, last] = shard_range(pg.rank(), world);
    for (int s = 0; s < steps; ++s) {
      zero ? zero_opt->zero_grad() : adam->zero_grad();
      const Tensor x = rows(100, s, kShards * kShardRows, 6), y = rows(900, s, kShards * kShardRows, 3);
      if (deterministic) {
        backward_shards(ddp, x, y, first, last);
      } else {  // the default mode: each rank one batch of its shards' rows, AVG over ranks
        const int64_t r0 = first * kShardRows, n = (last - first) * kShardRows;
        nn::functional::mse_loss(ddp(native::narrow(x, 0, r0, n)), native::narrow(y, 0, r0, n)).backward();
      }
      zero ? zero_opt->step() : static_cast<void>(adam->step());
    }
    if (pg.rank() == 0) {
      std::lock_guard<std::mutex> lk(out_mu);
      for (auto& p : net->parameters()) out.push_back(p.to_vector<float>());
    }
  });
  set_num_threads(before);
  return out;
}

// 5 Adam steps under join(); shards [4, 8) have data for the first 3 steps only, so the ranks
// holding them return from their loop early. Returns every rank's parameters (rank order).
std::vector<std::vector<std::vector<float>>> train_uneven(int world) {
  constexpr int kSteps = 5, kShortSteps = 3;
  auto groups = parallel::test::make_groups(world, parallel::test::tcp_options(20000, true));
  std::vector<std::vector<std::vector<float>>> out(static_cast<size_t>(world));
  parallel::test::on_ranks(groups, [&](parallel::ProcessGroupTCP& pg) {
    auto net = make_net();
    std::shared_ptr<parallel::ProcessGroup> group(&pg, [](parallel::ProcessGroup*) {});
    DistributedDataParallel<Net> ddp(net, group, sharded(true));
    optim::Adam adam(net->parameters(), optim::AdamOptions(0.01));
    const auto [first, last] = shard_range(pg.rank(), world);
    const int steps = first >= 4 ? kShortSteps : kSteps;
    ddp.join([&] {
      for (int s = 0; s < steps; ++s) {
        adam.zero_grad();
        const Tensor x = rows(100, s, kShards * kShardRows, 6), y = rows(900, s, kShards * kShardRows, 3);
        backward_shards(ddp, x, y, first, last);
        adam.step();
      }
    });
    for (auto& p : net->parameters()) out[static_cast<size_t>(pg.rank())].push_back(p.to_vector<float>());
  });
  return out;
}

TEST(DdpDeterministic, SameBitsAtEveryWorldSizeAndThreadCount) {
  const auto one = train(1, true, 4);
  ASSERT_FALSE(one.empty());
  for (int world : {2, 3, 4}) EXPECT_TRUE(same_bits(one, train(world, true, 4))) << "world " << world;
  EXPECT_TRUE(same_bits(one, train(2, true, 4, 2))) << "2 ranks, 2 intra-op threads";
  EXPECT_TRUE(same_bits(one, train(3, true, 4, 1, true))) << "3 ranks, ZeroRedundancyOptimizer";
}

TEST(DdpDeterministic, DefaultModeBitsDependOnTheWorldSize) {
  // What the option fixes: the same job over 1 and 3 ranks without it.
  const auto one = train(1, false, 4), three = train(3, false, 4);
  EXPECT_FALSE(same_bits(one, three)) << "the default mode gave equal bits: the test above proves nothing";
}

TEST(DdpDeterministic, MatchesTheLargeBatchGradient) {
  const auto det = train(2, true, 1);
  auto net = make_net();
  optim::Adam opt(net->parameters(), optim::AdamOptions(0.01));
  nn::functional::mse_loss(net->forward(rows(100, 0, kShards * kShardRows, 6)), rows(900, 0, kShards * kShardRows, 3))
      .backward();
  opt.step();
  const auto params = net->parameters();
  ASSERT_EQ(det.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const auto ref = params[i].to_vector<float>();
    for (size_t j = 0; j < ref.size(); ++j) ASSERT_NEAR(det[i][j], ref[j], 1e-5) << i << " " << j;
  }
}

TEST(DdpDeterministic, JoinWithUnevenInputsGivesTheSameBitsWhoeverJoins) {
  const auto two = train_uneven(2), four = train_uneven(4);
  for (size_t r = 0; r < two.size(); ++r) EXPECT_TRUE(same_bits(two[0], two[r])) << "2 ranks: rank " << r;
  for (size_t r = 0; r < four.size(); ++r) EXPECT_TRUE(same_bits(two[0], four[r])) << "4 ranks: rank " << r;
  // One process: the same steps on the rows of the shards that ran; a missing shard counts as a
  // zero gradient (divide_by_initial_world_size), so the loss over half the rows is halved.
  auto net = make_net();
  optim::Adam opt(net->parameters(), optim::AdamOptions(0.01));
  for (int s = 0; s < 5; ++s) {
    opt.zero_grad();
    const int64_t n = (s < 3 ? kShards : 4) * kShardRows;
    Tensor loss = nn::functional::mse_loss(net->forward(native::narrow(rows(100, s, kShards * kShardRows, 6), 0, 0, n)),
                                           native::narrow(rows(900, s, kShards * kShardRows, 3), 0, 0, n));
    (s < 3 ? loss : ember::mul(loss, scalar_tensor(0.5))).backward();
    opt.step();
  }
  const auto params = net->parameters();
  ASSERT_EQ(two[0].size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const auto ref = params[i].to_vector<float>();
    for (size_t j = 0; j < ref.size(); ++j) ASSERT_NEAR(two[0][i][j], ref[j], 1e-5) << i << " " << j;
  }
}

TEST(DdpDeterministic, ErrorsAreTyped) {
  auto groups = parallel::test::make_groups(2, parallel::test::tcp_options(20000, true));
  parallel::test::on_ranks(groups, [&](parallel::ProcessGroupTCP& pg) {
    std::shared_ptr<parallel::ProcessGroup> group(&pg, [](parallel::ProcessGroup*) {});
    DistributedDataParallelOptions o;
    o.deterministic = true;
    o.num_shards = 1;  // fewer than the ranks
    EXPECT_THROW(DistributedDataParallel<Net>(make_net(), group, o), ValueError);
    o.num_shards = 4;
    auto net = make_net();
    DistributedDataParallel<Net> ddp(net, group, o);
    EXPECT_THROW(ddp.register_comm_hook(parallel::bf16_compress_hook()), ValueError);
    // One shard per rank where the job said 4: every rank sees the same count and throws.
    Tensor x = rows(1, 0, 3, 6);
    const std::string err = support::error_of<ValueError>([&] { ember::sum(ddp(x)).backward(); });
    EXPECT_THAT(err, HasSubstr("ran 2 shard backward passes in this step, but num_shards is 4"));
    // NaN in one rank's shard: every rank's gradient of that parameter is NaN, the others finite.
    net->zero_grad();
    for (int k = 0; k < 2; ++k) {
      auto run = [&] {
        Tensor out = ddp(x);
        if (pg.rank() == 1 && k == 1) out = ember::mul(out, scalar_tensor(NAN));
        ember::sum(out).backward();
      };
      if (k == 0) {
        auto guard = ddp.no_sync();
        run();
      } else {
        run();
      }
    }
    EXPECT_TRUE(std::isnan(net->fc2->weight.grad().to_vector<float>()[0]));
  });
}

}  // namespace
