// Mixed precision across ranks and replicas: GradScaler's found-inf flag all-reduced over a
// two-rank tcp group (parallel/found_inf_sync.h; ranks as threads over a HashStore), so an
// overflow on one rank skips the step on every rank, and DataParallel carrying the caller's
// autocast into its replica threads.
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "nn/linear.h"
#include "nn/optim/grad_scaler.h"
#include "nn/optim/sgd.h"
#include "parallel/data_parallel.h"
#include "parallel/distributed/hash_store.h"
#include "parallel/distributed/tcp/process_group_tcp.h"
#include "parallel/found_inf_sync.h"

namespace ember::parallel {
namespace {

std::vector<std::shared_ptr<ProcessGroup>> make_groups(int n) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::shared_ptr<ProcessGroup>> groups(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  ProcessGroupTCPOptions o;
  o.timeout_ms = 20'000;
  o.host = "127.0.0.1";
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { groups[static_cast<size_t>(r)] = std::make_shared<ProcessGroupTCP>(store, r, n, o); });
  }
  for (auto& t : threads) t.join();
  return groups;
}

struct RankLog {
  std::vector<bool> stepped;
  std::vector<double> scales;
  std::vector<bool> weights_changed;
  std::string error;
};

// Each rank trains a Linear 4 steps with a GradScaler; rank `poisoned_rank` writes an inf into
// one gradient element at step `poisoned_step`. sync: the scaler all-reduces its flag.
std::vector<RankLog> run_ranks(bool sync, int poisoned_rank, int poisoned_step) {
  auto groups = make_groups(2);
  std::vector<RankLog> logs(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      RankLog& log = logs[static_cast<size_t>(r)];
      try {
        manual_seed(11);  // both ranks' generators are seeded alike; each builds its own model
        nn::LinearImpl fc(3, 2);
        optim::SGD sgd(fc.parameters(), optim::SGDOptions(0.1));
        optim::GradScalerOptions so;
        if (sync) so.found_inf_sync = all_reduce_found_inf(groups[static_cast<size_t>(r)]);
        optim::GradScaler scaler(so);
        const Tensor x = full({5, 3}, 0.5 + r);
        for (int step = 0; step < 4; ++step) {
          sgd.zero_grad();
          scaler.scale(sum(fc.forward(x))).backward();
          if (r == poisoned_rank && step == poisoned_step) {
            Tensor row = native::select(fc.weight.grad(), 0, 1);
            native::fill_(row, std::numeric_limits<double>::infinity());
          }
          const Tensor before = native::clone(fc.weight);
          log.stepped.push_back(scaler.step(sgd));
          scaler.update();
          log.scales.push_back(scaler.get_scale());
          log.weights_changed.push_back(!native::all(native::eq(before, fc.weight)).item<bool>());
        }
      } catch (const std::exception& e) {
        log.error = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return logs;
}

TEST(GradScalerAcrossRanks, OverflowOnOneRankSkipsTheStepOnEveryRank) {
  const std::vector<RankLog> logs = run_ranks(/*sync=*/true, /*poisoned_rank=*/1, /*poisoned_step=*/2);
  for (int r = 0; r < 2; ++r) {
    const RankLog& log = logs[static_cast<size_t>(r)];
    ASSERT_EQ(log.error, "") << "rank " << r;
    EXPECT_EQ(log.stepped, (std::vector<bool>{true, true, false, true})) << "rank " << r;
    EXPECT_EQ(log.weights_changed, (std::vector<bool>{true, true, false, true})) << "rank " << r;
    EXPECT_EQ(log.scales, (std::vector<double>{65536, 65536, 32768, 32768})) << "rank " << r;
  }
}

TEST(GradScalerAcrossRanks, WithoutTheSyncOnlyTheOverflowingRankSkips) {
  // The control: the agreement above comes from the all-reduce, not from the data.
  const std::vector<RankLog> logs = run_ranks(/*sync=*/false, /*poisoned_rank=*/1, /*poisoned_step=*/2);
  ASSERT_EQ(logs[0].error, "");
  ASSERT_EQ(logs[1].error, "");
  EXPECT_EQ(logs[0].stepped, (std::vector<bool>{true, true, true, true}));
  EXPECT_EQ(logs[1].stepped, (std::vector<bool>{true, true, false, true}));
  EXPECT_EQ(logs[0].scales.back(), 65536.0);
  EXPECT_EQ(logs[1].scales.back(), 32768.0);
}

TEST(GradScalerAcrossRanks, NullGroupIsAValueError) {
  EXPECT_THROW(all_reduce_found_inf(nullptr), ValueError);
}

TEST(DataParallelAutocast, ReplicasRunUnderTheCallersAutocast) {
  manual_seed(5);
  auto fc = std::make_shared<nn::LinearImpl>(3, 2);
  DataParallel<nn::LinearImpl> dp(fc, {Device::cpu(0), Device::cpu(1)});
  const Tensor x = randn({6, 3});
  Tensor y;
  {
    autocast guard(DeviceType::CPU, kBFloat16);
    y = dp(x);
  }
  EXPECT_EQ(y.dtype(), kBFloat16);
  sum(to(y, kFloat32)).backward();
  EXPECT_EQ(fc->weight.grad().dtype(), kFloat32);
  EXPECT_EQ(dp(x).dtype(), kFloat32);  // and not after the guard
}

}  // namespace
}  // namespace ember::parallel
