// ZeroRedundancyOptimizer with ranks as threads (each rank its own logical device cpu:r and its
// own ProcessGroupTCP over one HashStore), under DistributedDataParallel: 20 Adam steps give the
// parameters plain Adam gives on the same ranks, each rank holds about half of Adam's state
// (allocator statistics), and a state consolidated on 2 ranks resumes on 3.
#include <gtest/gtest.h>

#include <functional>
#include <mutex>
#include <thread>

#include "core/allocator.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "nn/container.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/optim/adam.h"
#include "parallel/distributed/hash_store.h"
#include "parallel/distributed/tcp/process_group_tcp.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/zero_redundancy_optimizer.h"

namespace ember::parallel {
namespace {

struct Mlp : nn::Cloneable<Mlp> {
  std::shared_ptr<nn::LinearImpl> a, b, c, d;
  Mlp() : Cloneable("Mlp") { reset(); }
  void reset() override {
    a = register_module("a", std::make_shared<nn::LinearImpl>(8, 32));
    b = register_module("b", std::make_shared<nn::LinearImpl>(32, 32));
    c = register_module("c", std::make_shared<nn::LinearImpl>(32, 32));
    d = register_module("d", std::make_shared<nn::LinearImpl>(32, 4));
  }
  Tensor forward(const Tensor& x) { return d->forward(tanh(c->forward(tanh(b->forward(tanh(a->forward(x))))))); }
};

std::shared_ptr<Mlp> make_mlp(Device device) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  manual_seed(21);
  auto m = std::make_shared<Mlp>();
  m->to(device);
  return m;
}

// Step s's whole batch (12 rows: 2 or 3 ranks take equal slices).
std::pair<Tensor, Tensor> batch(int s) {
  Generator g(700 + static_cast<uint64_t>(s));
  Tensor x = randn({12, 8}, {}, &g);
  Tensor y = randn({12, 4}, {}, &g);
  return {x, y};
}

void run_ranks(int world, const std::function<void(int, std::shared_ptr<ProcessGroup>)>& fn) {
  auto store = std::make_shared<HashStore>();
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        ProcessGroupTCPOptions o;
        o.timeout_ms = 20000;
        o.host = "127.0.0.1";
        fn(r, std::make_shared<ProcessGroupTCP>(store, r, world, o));
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

std::vector<std::vector<double>> values_of(const nn::Module& m) {
  std::vector<std::vector<double>> out;
  for (auto& p : m.parameters()) out.push_back(native::to(p, Device::cpu(), kFloat64).to_vector<double>());
  return out;
}

ZeroRedundancyOptimizer::OptimizerFactory adam() {
  return [](std::vector<Tensor> p) { return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions(1e-2)); };
}

// One DDP training step on rank r of `world` (rows r * 12/world ...).
void ddp_step(DistributedDataParallel<Mlp>& ddp, int r, int world, int s) {
  auto [x, y] = batch(s);
  const int64_t rows = 12 / world;
  Device dev = ddp.module()->parameters()[0].device();
  x = native::to(native::narrow(x, 0, r * rows, rows), dev);
  y = native::to(native::narrow(y, 0, r * rows, rows), dev);
  nn::functional::mse_loss(ddp(x), y).backward();
}

TEST(ZeroRedundancyOptimizer, TwentyAdamStepsEqualPlainAdam) {
  std::vector<std::vector<std::vector<double>>> zero(2), plain(2);
  for (bool sharded : {true, false}) {
    run_ranks(2, [&](int r, std::shared_ptr<ProcessGroup> pg) {
      auto m = make_mlp(Device::cpu(r));
      DistributedDataParallel<Mlp> ddp(m, pg);
      std::unique_ptr<optim::Adam> opt;
      std::unique_ptr<ZeroRedundancyOptimizer> zopt;
      if (sharded) {
        zopt = std::make_unique<ZeroRedundancyOptimizer>(m->parameters(), pg, adam());
      } else {
        opt = std::make_unique<optim::Adam>(m->parameters(), optim::AdamOptions(1e-2));
      }
      for (int s = 0; s < 20; ++s) {
        sharded ? zopt->zero_grad() : opt->zero_grad();
        ddp_step(ddp, r, 2, s);
        sharded ? zopt->step() : (void)opt->step();
      }
      (sharded ? zero : plain)[r] = values_of(*m);
    });
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(zero[r].size(), plain[r].size());
    for (size_t i = 0; i < plain[r].size(); ++i) {
      for (size_t j = 0; j < plain[r][i].size(); ++j) {
        ASSERT_NEAR(zero[r][i][j], plain[r][i][j], 1e-6) << "rank " << r << " param " << i << " element " << j;
      }
    }
  }
}

TEST(ZeroRedundancyOptimizer, EachRankHoldsAboutHalfOfAdamsState) {
  // Plain Adam's state bytes on a device of its own: allocated bytes that outlive the first step.
  auto state_bytes = [](Device dev, const std::function<void()>& first_step) {
    const int64_t before = memory_stats(dev).allocated_bytes;
    first_step();
    return memory_stats(dev).allocated_bytes - before;
  };
  int64_t full = 0;
  {
    auto m = make_mlp(Device::cpu(5));
    optim::Adam opt(m->parameters(), optim::AdamOptions(1e-2));
    auto [x, y] = batch(0);
    nn::functional::mse_loss(m->forward(native::to(x, Device::cpu(5))), native::to(y, Device::cpu(5))).backward();
    full = state_bytes(Device::cpu(5), [&] { opt.step(); });
  }
  std::vector<int64_t> shard(2);
  run_ranks(2, [&](int r, std::shared_ptr<ProcessGroup> pg) {
    const Device dev = Device::cpu(r + 6);
    auto m = make_mlp(dev);
    DistributedDataParallel<Mlp> ddp(m, pg);
    ZeroRedundancyOptimizer zopt(m->parameters(), pg, adam());
    ddp_step(ddp, r, 2, 0);
    shard[r] = state_bytes(dev, [&] { zopt.step(); });
  });
  ASSERT_GT(full, 0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_LT(static_cast<double>(shard[r]) / static_cast<double>(full), 0.6) << "rank " << r;
    EXPECT_GT(static_cast<double>(shard[r]) / static_cast<double>(full), 0.4) << "rank " << r;
  }
  EXPECT_NEAR(static_cast<double>(shard[0] + shard[1]), static_cast<double>(full), 0.05 * static_cast<double>(full));
}

// Largest parameters are placed first: in registration order, sizes {1, 1, 2} (x 64 floats)
// would put the last and largest on rank 0 beside the first (3 : 1); largest first gives 2 : 2.
TEST(ZeroRedundancyOptimizer, PartitionPlacesTheLargestParametersFirst) {
  std::vector<std::vector<int>> owners(2);
  run_ranks(2, [&](int r, std::shared_ptr<ProcessGroup> pg) {
    std::vector<Tensor> params{zeros({64}), zeros({64}), zeros({128}), zeros({1})};
    ZeroRedundancyOptimizer zopt(params, pg, adam());
    for (size_t i = 0; i < params.size(); ++i) owners[r].push_back(zopt.owner(i));
  });
  EXPECT_EQ(owners[0], owners[1]) << "every rank computes the same partition";
  EXPECT_EQ(owners[0], (std::vector<int>{1, 1, 0, 0}));
}

// 5 steps on 2 ranks, consolidate on rank 0, then 5 more on 3 ranks from that state: the same
// parameters as 10 steps of plain Adam in one process (up to the ranks' float rounding).
TEST(ZeroRedundancyOptimizer, ConsolidatedStateResumesOnAnotherWorldSize) {
  std::vector<std::vector<double>> expected;
  {
    auto m = make_mlp(Device::cpu());
    optim::Adam opt(m->parameters(), optim::AdamOptions(1e-2));
    for (int s = 0; s < 10; ++s) {
      opt.zero_grad();
      auto [x, y] = batch(s);
      nn::functional::mse_loss(m->forward(x), y).backward();
      opt.step();
    }
    expected = values_of(*m);
  }
  optim::OptimizerStateDict saved;
  nn::StateDict weights;
  run_ranks(2, [&](int r, std::shared_ptr<ProcessGroup> pg) {
    auto m = make_mlp(Device::cpu(r));
    DistributedDataParallel<Mlp> ddp(m, pg);
    ZeroRedundancyOptimizer zopt(m->parameters(), pg, adam());
    for (int s = 0; s < 5; ++s) {
      zopt.zero_grad();
      ddp_step(ddp, r, 2, s);
      zopt.step();
    }
    zopt.consolidate_state_dict(0);
    if (r == 0) {
      EXPECT_EQ(zopt.state_dict().state.size(), m->parameters().size());
      for (const auto& [i, st] : zopt.state_dict().state) {
        for (const auto& [k, t] : st) saved.state[i][k] = native::to(t, Device::cpu());
      }
      saved.param_groups = zopt.state_dict().param_groups;
      for (const auto& [k, t] : m->state_dict()) weights.emplace_back(k, native::to(t, Device::cpu(), t.dtype()));
    } else {
      EXPECT_THROW(zopt.state_dict(), Error);
    }
  });
  std::vector<std::vector<std::vector<double>>> got(3);
  run_ranks(3, [&](int r, std::shared_ptr<ProcessGroup> pg) {
    auto m = make_mlp(Device::cpu(r));
    m->load_state_dict(weights);
    DistributedDataParallel<Mlp> ddp(m, pg);
    ZeroRedundancyOptimizer zopt(m->parameters(), pg, adam());
    zopt.load_state_dict(saved);
    for (int s = 5; s < 10; ++s) {
      zopt.zero_grad();
      ddp_step(ddp, r, 3, s);
      zopt.step();
    }
    got[r] = values_of(*m);
  });
  for (int r = 0; r < 3; ++r) {
    for (size_t i = 0; i < expected.size(); ++i) {
      for (size_t j = 0; j < expected[i].size(); ++j) {
        ASSERT_NEAR(got[r][i][j], expected[i][j], 1e-4) << "rank " << r << " param " << i << " element " << j;
      }
    }
  }
}

}  // namespace
}  // namespace ember::parallel
