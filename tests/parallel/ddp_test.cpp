// DistributedDataParallel with ranks as threads (each rank its own logical device cpu:r and its
// own ProcessGroupTCP over a shared HashStore): equality with the single-process large batch,
// no_sync accumulation, unused-parameter errors and detection, compression hooks, buckets.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <latch>
#include <set>
#include <mutex>
#include <thread>

#include "core/allocator.h"
#include "core/ops/native.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/optim/sgd.h"
#include "parallel/distributed/hash_store.h"
#include "parallel/distributed/prefix_store.h"
#include "parallel/distributed/tcp/process_group_tcp.h"
#include "parallel/distributed_data_parallel.h"
#include "tests/support/error_text.h"

using namespace ember;
using parallel::DistributedDataParallel;
using parallel::DistributedDataParallelOptions;
using ::testing::HasSubstr;

namespace {

struct Net : nn::Cloneable<Net> {
  bool use_extra = true;
  std::shared_ptr<nn::LinearImpl> fc1, fc2, extra;
  Net() : Cloneable("Net") { reset(); }
  void reset() override {
    fc1 = register_module("fc1", std::make_shared<nn::LinearImpl>(6, 16));
    fc2 = register_module("fc2", std::make_shared<nn::LinearImpl>(16, 3));
    extra = register_module("extra", std::make_shared<nn::LinearImpl>(16, 3));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = tanh(fc1->forward(x));
    Tensor y = fc2->forward(h);
    return use_extra ? add(y, extra->forward(h)) : y;
  }
};

// Deterministic data: batch i of rank r is rows [i*B*W + r*B, ...) of one global stream.
Tensor global_x(int step, int64_t rows) {
  Generator g(1000 + static_cast<uint64_t>(step));
  return randn({rows, 6}, {}, &g);
}
Tensor global_y(int step, int64_t rows) {
  Generator g(5000 + static_cast<uint64_t>(step));
  return randn({rows, 3}, {}, &g);
}

// Rank threads build their nets at once, and manual_seed + the initializers' draws go through
// the process-wide default generator: without the lock one rank's seed lands between another's
// draws, rank 0 starts from weights that are not seed 7's, and the comparison with the
// reference fails although DDP did its job (seen ~1 run in 100 of the parity tests).
std::shared_ptr<Net> make_net(Device d, uint64_t seed) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  manual_seed(seed);
  auto net = std::make_shared<Net>();
  net->to(d);
  return net;
}

// Runs `fn(rank, group)` on `world` threads, each with its own ProcessGroupTCP.
void run_ranks(int world, const std::function<void(int, std::shared_ptr<parallel::ProcessGroup>)>& fn,
               int64_t group_timeout_ms = 20000) {
  auto store = std::make_shared<parallel::HashStore>();
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        parallel::ProcessGroupTCPOptions o;
        o.timeout_ms = group_timeout_ms;
        o.host = "127.0.0.1";
        auto pg = std::make_shared<parallel::ProcessGroupTCP>(store, r, world, o);
        fn(r, pg);
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

std::vector<std::vector<float>> params_of(nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (auto& p : m.parameters()) out.push_back(p.to_vector<float>());
  return out;
}

void expect_close(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    for (size_t j = 0; j < a[i].size(); ++j) {
      EXPECT_NEAR(a[i][j], b[i][j], tol * (1 + std::abs(b[i][j]))) << "param " << i << " element " << j;
    }
  }
}

std::vector<std::vector<float>> reference_training(int world, int64_t per_rank, int steps) {
  auto net = make_net(Device::cpu(), 7);
  optim::SGD opt(net->parameters(), optim::SGDOptions(0.1));
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    Tensor loss = nn::functional::mse_loss(net->forward(global_x(s, per_rank * world)), global_y(s, per_rank * world));
    loss.backward();
    opt.step();
  }
  return params_of(*net);
}

}  // namespace

// (world size, gradient_as_bucket_view, zero_grad's set_to_none)
class DdpWorld : public ::testing::TestWithParam<std::tuple<int, bool, bool>> {};

TEST_P(DdpWorld, SameParametersAsOneProcessOnTheConcatenatedBatch) {
  const auto [world, as_view, set_to_none] = GetParam();
  const int64_t per_rank = 4;
  const int steps = 10;
  auto expected = reference_training(world, per_rank, steps);
  std::vector<std::vector<std::vector<float>>> got(world);
  run_ranks(world, [&](int r, std::shared_ptr<parallel::ProcessGroup> pg) {
    Device dev = Device::cpu(r);
    // Different seeds per rank: DDP must broadcast rank 0's initial parameters.
    auto net = make_net(dev, r == 0 ? 7 : 100 + r);
    DistributedDataParallelOptions o;
    o.bucket_cap_mb = 0.0002;  // several buckets even for this small model
    o.timeout_ms = 20000;
    o.gradient_as_bucket_view = as_view;
    DistributedDataParallel<Net> ddp(net, pg, o);
    EXPECT_GT(ddp.reducer().bucket_parameter_indices().size(), 2u);
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.1));
    for (int s = 0; s < steps; ++s) {
      opt.zero_grad(set_to_none);
      Tensor x = native::to(native::narrow(global_x(s, per_rank * world), 0, r * per_rank, per_rank), dev);
      Tensor y = native::to(native::narrow(global_y(s, per_rank * world), 0, r * per_rank, per_rank), dev);
      Tensor loss = nn::functional::mse_loss(ddp(x), y);
      loss.backward();
      // The tcp backend reduces each bucket in the .grad tensors themselves (Note [Direct
      // buckets]); gradient_as_bucket_view's .grad are the buckets.
      EXPECT_EQ(ddp.reducer().last_direct_buckets(),
                as_view ? 0u : ddp.reducer().bucket_parameter_indices().size());
      opt.step();
    }
    got[r] = params_of(*net);
  });
  for (int r = 0; r < world; ++r) expect_close(got[r], expected, 1e-5);
}

// Regression test for the in-place reduction of Note [Direct buckets]: two parameters whose
// .grad is one tensor (both gradients accumulated into it) must get the average once, not the
// average of the average, whether they share a bucket or not (bucket_cap_mb). The buckets
// holding them go through their flat buffers, and only those.
class DdpSharedGrad : public ::testing::TestWithParam<double> {};

TEST_P(DdpSharedGrad, GradientsSharingOneTensorAreAveragedOnce) {
  const int world = 2;
  const int64_t per_rank = 4;
  // Expected: the mean over ranks of (fc2's + extra's weight gradient) of that rank's batch.
  auto ref = make_net(Device::cpu(), 7);
  std::vector<float> expected(3 * 16, 0.0f);
  for (int r = 0; r < world; ++r) {
    ref->zero_grad(/*set_to_none=*/true);
    Tensor x = native::narrow(global_x(0, per_rank * world), 0, r * per_rank, per_rank);
    Tensor y = native::narrow(global_y(0, per_rank * world), 0, r * per_rank, per_rank);
    nn::functional::mse_loss(ref->forward(x), y).backward();
    std::vector<float> a = ref->fc2->weight.grad().to_vector<float>();
    std::vector<float> b = ref->extra->weight.grad().to_vector<float>();
    for (size_t k = 0; k < expected.size(); ++k) expected[k] += (a[k] + b[k]) / world;
  }
  std::vector<std::vector<float>> got(world);
  std::vector<size_t> direct(world), buckets(world);
  run_ranks(world, [&](int r, std::shared_ptr<parallel::ProcessGroup> pg) {
    Device dev = Device::cpu(r);
    auto net = make_net(dev, 7);
    DistributedDataParallelOptions o;
    o.timeout_ms = 20000;
    o.bucket_cap_mb = GetParam();
    DistributedDataParallel<Net> ddp(net, pg, o);
    Tensor shared = zeros({3, 16}, TensorOptions().device(dev));
    net->fc2->weight.set_grad(shared);
    net->extra->weight.set_grad(shared);
    Tensor x = native::to(native::narrow(global_x(0, per_rank * world), 0, r * per_rank, per_rank), dev);
    Tensor y = native::to(native::narrow(global_y(0, per_rank * world), 0, r * per_rank, per_rank), dev);
    nn::functional::mse_loss(ddp(x), y).backward();
    EXPECT_EQ(net->fc2->weight.grad().raw_data(), shared.raw_data());
    got[r] = shared.to_vector<float>();
    direct[r] = ddp.reducer().last_direct_buckets();
    // Parameter indices: fc1.weight, fc1.bias, fc2.weight (2), fc2.bias, extra.weight (4), ...
    buckets[r] = 0;
    for (const auto& bucket : ddp.reducer().bucket_parameter_indices()) {
      const bool holds = std::find(bucket.begin(), bucket.end(), 2u) != bucket.end() ||
                         std::find(bucket.begin(), bucket.end(), 4u) != bucket.end();
      if (!holds) ++buckets[r];
    }
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(direct[r], buckets[r]) << "every bucket but those holding the shared gradient is reduced in place";
    ASSERT_EQ(got[r].size(), expected.size());
    for (size_t k = 0; k < expected.size(); ++k) EXPECT_NEAR(got[r][k], expected[k], 1e-5) << "rank " << r << " element " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(BucketCaps, DdpSharedGrad, ::testing::Values(25.0, 0.0002));

// Direct buckets never touch their flat buffers, so those are not allocated: constructing DDP
// allocates nothing that lasts, and once a step's gradients are dropped the rank's logical
// device is back where it was before DDP. gradient_as_bucket_view allocates its buckets at
// construction. Rank r runs on cpu:r+1: the helpers make their temporaries on cpu:0 (the
// default device) from both rank threads, which would blur cpu:0's figures.
TEST(Ddp, DirectBucketsAllocateNoFlatCopyOfTheGradients) {
  const int world = 2;
  run_ranks(world, [&](int r, std::shared_ptr<parallel::ProcessGroup> pg) {
    const Device dev = Device::cpu(r + 1);
    auto allocated = [&] { return memory_stats(dev).allocated_bytes; };
    // The engine's worker may release a step's last buffers just after backward() returned.
    auto settles_at = [&](int64_t want) {
      for (int i = 0; i < 200 && allocated() != want; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return allocated();
    };
    auto net = make_net(dev, 7);
    int64_t param_bytes = 0;
    for (auto& p : net->parameters()) param_bytes += static_cast<int64_t>(p.nbytes());
    Tensor x = native::to(native::narrow(global_x(0, 8), 0, r * 4, 4), dev);
    Tensor y = native::to(native::narrow(global_y(0, 8), 0, r * 4, 4), dev);
    const int64_t before = allocated();
    DistributedDataParallelOptions o;
    o.timeout_ms = 20000;
    DistributedDataParallel<Net> ddp(net, pg, o);
    EXPECT_EQ(allocated(), before) << "rank " << r << ": construction";
    nn::functional::mse_loss(ddp(x), y).backward();
    EXPECT_EQ(ddp.reducer().last_direct_buckets(), ddp.reducer().bucket_parameter_indices().size());
    net->zero_grad(/*set_to_none=*/true);
    EXPECT_EQ(settles_at(before), before) << "rank " << r << ": after a step, gradients dropped";

    auto view_net = make_net(dev, 7);
    const int64_t v0 = allocated();
    o.gradient_as_bucket_view = true;
    DistributedDataParallel<Net> view_ddp(view_net, pg, o);
    EXPECT_GE(allocated() - v0, param_bytes) << "rank " << r;
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, DdpWorld,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::Bool(), ::testing::Bool()));

// With gradient_as_bucket_view every .grad is a view into a bucket the comm hook was handed,
// and the averaged values are there without a copy back; without it no .grad aliases a bucket.
TEST(Ddp, GradientAsBucketViewMakesGradAliasTheBuckets) {
  for (bool as_view : {false, true}) {
    SCOPED_TRACE(as_view ? "gradient_as_bucket_view" : "copied gradients");
    run_ranks(2, [&](int r, std::shared_ptr<parallel::ProcessGroup> pg) {
      Device dev = Device::cpu(r);
      auto net = make_net(dev, 7);
      DistributedDataParallelOptions o;
      o.bucket_cap_mb = 0.0002;
      o.gradient_as_bucket_view = as_view;
      DistributedDataParallel<Net> ddp(net, pg, o);
      std::vector<std::pair<const char*, const char*>> ranges;  // [begin, end) of each bucket
      ddp.register_comm_hook([&](parallel::ProcessGroup& g, parallel::GradBucket& bucket) {
        const char* b = static_cast<const char*>(bucket.buffer.raw_data());
        ranges.emplace_back(b, b + bucket.buffer.nbytes());
        return parallel::CommHookResult{g.all_reduce(bucket.buffer), nullptr};
      });
      for (int step = 0; step < 2; ++step) {
        ranges.clear();
        net->zero_grad(/*set_to_none=*/true);
        Tensor x = native::to(native::narrow(global_x(step, 8), 0, r * 4, 4), dev);
        Tensor y = native::to(native::narrow(global_y(step, 8), 0, r * 4, 4), dev);
        nn::functional::mse_loss(ddp(x), y).backward();
        ASSERT_EQ(ranges.size(), ddp.reducer().bucket_parameter_indices().size());
        for (auto& [name, p] : net->named_parameters()) {
          const char* g = static_cast<const char*>(p.grad().raw_data());
          bool inside = false;
          for (auto& [b, e] : ranges) inside = inside || (g >= b && g + p.grad().nbytes() <= e);
          EXPECT_EQ(inside, as_view) << name << " on rank " << r << ", step " << step;
          EXPECT_EQ(p.grad().sizes(), p.sizes()) << name;
        }
      }
    });
  }
}

class DdpNoSync : public ::testing::TestWithParam<bool> {};  // gradient_as_bucket_view

TEST_P(DdpNoSync, AccumulationEqualsTheLargeBatchStep) {
  const bool as_view = GetParam();
  const int world = 2;
  const int64_t per_rank = 4;
  // Reference: one step on the mean over 2 micro-batches x 2 ranks (each micro-batch loss is a
  // mean, so the accumulated gradient is twice the large-batch gradient: use lr/2).
  auto net_ref = make_net(Device::cpu(), 7);
  {
    optim::SGD opt(net_ref->parameters(), optim::SGDOptions(0.1));
    opt.zero_grad();
    Tensor x = cat({global_x(0, per_rank * world), global_x(1, per_rank * world)}, 0);
    Tensor y = cat({global_y(0, per_rank * world), global_y(1, per_rank * world)}, 0);
    nn::functional::mse_loss(net_ref->forward(x), y).backward();
    opt.step();
  }
  auto expected = params_of(*net_ref);
  std::vector<std::vector<std::vector<float>>> got(world);
  run_ranks(world, [&](int r, std::shared_ptr<parallel::ProcessGroup> pg) {
    Device dev = Device::cpu(r);
    auto net = make_net(dev, 7);
    DistributedDataParallelOptions o;
    o.gradient_as_bucket_view = as_view;
    DistributedDataParallel<Net> ddp(net, pg, o);
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.05));
    // Two passes over the same micro-batches; only the second steps. The first starts with no
    // .grad; the second starts from .grad zeroed in place, which with as_view are the bucket
    // views, so both micro-batches accumulate straight into the buckets.
    for (int pass = 0; pass < 2; ++pass) {
      opt.zero_grad(/*set_to_none=*/pass == 0);
      for (int micro = 0; micro < 2; ++micro) {
        Tensor x = native::to(native::narrow(global_x(micro, per_rank * world), 0, r * per_rank, per_rank), dev);
        Tensor y = native::to(native::narrow(global_y(micro, per_rank * world), 0, r * per_rank, per_rank), dev);
        if (micro == 0) {
          auto guard = ddp.no_sync();
          nn::functional::mse_loss(ddp(x), y).backward();
        } else {
          nn::functional::mse_loss(ddp(x), y).backward();
        }
      }
    }
    opt.step();
    got[r] = params_of(*net);
  });
  for (int r = 0; r < world; ++r) expect_close(got[r], expected, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(GradientAsBucketView, DdpNoSync, ::testing::Bool());

TEST(Ddp, UnusedParameterIsReportedByNameOnTheNextIteration) {
  run_ranks(2, [&](int r, std::shared_ptr<parallel::ProcessGroup> pg) {
    Device dev = Device::cpu(r);
    auto net = make_net(dev, 7);
    net->use_extra = false;  // `extra` gets no gradient
    DistributedDataParallelOptions o;
    o.timeout_ms = 20000;
    DistributedDataParallel<Net> ddp(net, pg, o);
    Tensor x = native::to(global_x(0, 4), dev), y = native::to(global_y(0, 4), dev);
    nn::functional::mse_loss(ddp(x), y).backward();
    const std::string err = support::error_of<DistributedError>([&] { ddp(x); });
    EXPECT_THAT(err, HasSubstr("extra.weight"));
    EXPECT_THAT(err, HasSubstr("extra.bias"));
    EXPECT_THAT(err, HasSubstr("rank " + std::to_string(r)));
    EXPECT_THAT(err, HasSubstr("find_unused_parameters"));
  });
}

TEST(Ddp, FindUnusedParametersMakesItWork) {
  std::vector<std::vector<std::vector<float>>> got(2);
  run_ranks(2, [&](int r, std::shared_ptr<parallel::ProcessGroup> pg) {
    Device dev = Device::cpu(r);
    auto net = make_net(dev, 7);
    net->use_extra = false;
    DistributedDataParallelOptions o;
    o.find_unused_parameters = true;
    o.timeout_ms = 20000;
    DistributedDataParallel<Net> ddp(net, pg, o);
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.1));
    for (int s = 0; s < 3; ++s) {
      opt.zero_grad();
      Tensor x = native::to(native::narrow(global_x(s, 8), 0, r * 4, 4), dev);
      Tensor y = native::to(native::narrow(global_y(s, 8), 0, r * 4, 4), dev);
      nn::functional::mse_loss(ddp(x), y).backward();
      opt.step();
    }
    got[r] = params_of(*net);
  });
  expect_close(got[0], got[1], 0);
}

// A forward returning std::vector<Tensor> (fc2's and extra's heads).
struct VectorNet : nn::Cloneable<VectorNet> {
  std::shared_ptr<nn::LinearImpl> fc1, fc2, extra, unused;
  VectorNet() : Cloneable("VectorNet") { reset(); }
  void reset() override {
    fc1 = register_module("fc1", std::make_shared<nn::LinearImpl>(6, 16));
    fc2 = register_module("fc2", std::make_shared<nn::LinearImpl>(16, 3));
    extra = register_module("extra", std::make_shared<nn::LinearImpl>(16, 3));
    unused = register_module("unused", std::make_shared<nn::LinearImpl>(16, 3));
  }
  std::vector<Tensor> forward(const Tensor& x) {
    Tensor h = tanh(fc1->forward(x));
    return {fc2->forward(h), extra->forward(h)};
  }
};

// Regression: DDP's output walker knew Tensor, tuples and PackedSequence but not
// std::vector<Tensor>, so with find_unused_parameters every parameter was marked unused (ready
// with a zero gradient) at forward and backward failed with "parameter fc2.bias ... received a
// gradient twice in one iteration". Now the outputs are walked by core/nested.h: only `unused`
// is marked unused, and the ranks agree on the averaged gradients of a single process.
TEST(Ddp, VectorOutputWithFindUnusedParametersDoesNotReceiveAGradientTwice) {
  std::vector<std::vector<std::vector<float>>> grads(2);
  std::vector<std::vector<float>> expected;
  {
    static std::mutex mu;
    std::lock_guard<std::mutex> lk(mu);
    manual_seed(11);
    VectorNet ref;
    Tensor x = global_x(0, 8), y = global_y(0, 8);
    auto outs = ref.forward(x);
    add(nn::functional::mse_loss(outs[0], y), nn::functional::mse_loss(outs[1], y)).backward();
    for (auto& p : ref.parameters()) expected.push_back(p.grad().defined() ? p.grad().to_vector<float>() : std::vector<float>());
  }
  run_ranks(2, [&](int r, std::shared_ptr<parallel::ProcessGroup> pg) {
    Device dev = Device::cpu(r);
    std::shared_ptr<VectorNet> net;
    {
      static std::mutex mu;
      std::lock_guard<std::mutex> lk(mu);
      manual_seed(11);
      net = std::make_shared<VectorNet>();
      net->to(dev);
    }
    DistributedDataParallelOptions o;
    o.find_unused_parameters = true;
    o.timeout_ms = 20000;
    DistributedDataParallel<VectorNet> ddp(net, pg, o);
    Tensor x = native::to(native::narrow(global_x(0, 8), 0, r * 4, 4), dev);
    Tensor y = native::to(native::narrow(global_y(0, 8), 0, r * 4, 4), dev);
    std::vector<Tensor> outs = ddp(x);
    ASSERT_NO_THROW(add(nn::functional::mse_loss(outs[0], y), nn::functional::mse_loss(outs[1], y)).backward());
    for (auto& p : net->parameters()) grads[r].push_back(p.grad().defined() ? p.grad().to_vector<float>() : std::vector<float>());
  });
  // `unused` gets a zero gradient from DDP (PyTorch's behaviour); the rest equal the one-process run.
  ASSERT_EQ(grads[0].size(), expected.size());
  for (size_t i = 0; i + 2 < expected.size(); ++i) {
    ASSERT_EQ(grads[0][i].size(), expected[i].size()) << "param " << i;
    for (size_t j = 0; j < expected[i].size(); ++j) EXPECT_NEAR(grads[0][i][j], expected[i][j], 1e-5) << "param " << i;
  }
  for (size_t i = expected.size() - 2; i < expected.size(); ++i) {
    for (float v : grads[0][i]) EXPECT_EQ(v, 0.0f) << "unused param " << i;
  }
  expect_close(grads[0], grads[1], 0);
}

TEST(Ddp, Bf16CompressionHookApproximatesTheAverage) {
  std::vector<std::vector<std::vector<float>>> grads(2);
  run_ranks(2, [&](int r, std::shared_ptr<parallel::ProcessGroup> pg) {
    Device dev = Device::cpu(r);
    auto net = make_net(dev, 7);
    DistributedDataParallel<Net> ddp(net, pg);
    ddp.register_comm_hook(parallel::bf16_compress_hook());
    Tensor x = native::to(native::narrow(global_x(0, 8), 0, r * 4, 4), dev);
    Tensor y = native::to(native::narrow(global_y(0, 8), 0, r * 4, 4), dev);
    nn::functional::mse_loss(ddp(x), y).backward();
    for (auto& p : net->parameters()) grads[r].push_back(p.grad().to_vector<float>());
  });
  // Reference gradients on the full batch in float32.
  auto net = make_net(Device::cpu(), 7);
  nn::functional::mse_loss(net->forward(global_x(0, 8)), global_y(0, 8)).backward();
  std::vector<std::vector<float>> ref;
  for (auto& p : net->parameters()) ref.push_back(p.grad().to_vector<float>());
  expect_close(grads[0], grads[1], 0);
  for (size_t i = 0; i < ref.size(); ++i) {
    for (size_t j = 0; j < ref[i].size(); ++j) EXPECT_NEAR(grads[0][i][j], ref[i][j], 2e-2 * (1 + std::abs(ref[i][j])));
  }
}

// Buckets go out while backward still runs: with one parameter per bucket, the buckets of fc2
// (the last layer, whose gradients come first) are launched before backward has reached fc1.
// This holds only if every AccumulateGrad runs as soon as its gradient is complete (Note
// [Ready order] in autograd/engine.cpp): a Linear's bias would otherwise wait for the whole
// descent through fc1 and hold back every bucket after its own.
TEST(Ddp, BucketsLaunchBeforeBackwardReachesTheFirstLayer) {
  std::vector<std::vector<bool>> fc1_done_at_launch(2);
  run_ranks(2, [&](int r, std::shared_ptr<parallel::ProcessGroup> pg) {
    Device dev = Device::cpu(r);
    auto net = make_net(dev, 7);
    net->use_extra = false;
    DistributedDataParallelOptions o;
    o.bucket_cap_mb = 1e-6;  // every parameter its own bucket
    o.find_unused_parameters = true;  // `extra` takes no part
    DistributedDataParallel<Net> ddp(net, pg, o);
    Tensor w1 = net->fc1->weight;
    ddp.register_comm_hook([&, w1, r](parallel::ProcessGroup& g, parallel::GradBucket& bucket) {
      fc1_done_at_launch[r].push_back(w1.grad().defined());
      return parallel::CommHookResult{g.all_reduce(bucket.buffer), nullptr};
    });
    Tensor x = native::to(native::narrow(global_x(0, 8), 0, r * 4, 4), dev);
    Tensor y = native::to(native::narrow(global_y(0, 8), 0, r * 4, 4), dev);
    nn::functional::mse_loss(ddp(x), y).backward();
  });
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const auto& v = fc1_done_at_launch[r];
    ASSERT_GE(v.size(), 4u);  // extra's 2 (unused, launched at forward), fc2's 2, fc1's 2
    // The buckets in reverse registration order: extra.bias, extra.weight, fc2.bias,
    // fc2.weight, fc1.bias, fc1.weight. fc2's went out before fc1.weight had a gradient.
    EXPECT_FALSE(v[2]) << "fc2.bias's bucket waited for fc1";
    EXPECT_FALSE(v[3]) << "fc2.weight's bucket waited for fc1";
  }
}

// ---- join: uneven inputs (Note [Join]) --------------------------------------------------------

namespace {

/// y = w * x with a scalar weight, and a buffer counting forwards (to see whose buffers win).
struct Scalar : nn::Cloneable<Scalar> {
  Tensor w, count;
  Scalar() : Cloneable("Scalar") { reset(); }
  void reset() override {
    w = register_parameter("w", full({1}, 0.5));
    count = register_buffer("count", zeros({1}));
  }
  Tensor forward(const Tensor& x) {
    {
      NoGradGuard no_grad;
      native::add_(count, 1.0);
    }
    return mul(w, x);
  }
};

// Rank r's batch i is the constant x = (r + 1) * (i + 1); loss = w * x, so its gradient is x.
double x_of(int r, int i) { return (r + 1.0) * (i + 1.0); }

}  // namespace

// (batches per rank, divide_by_initial_world_size, bf16 comm hook with gradient_as_bucket_view)
class DdpJoin : public ::testing::TestWithParam<std::tuple<std::vector<int>, bool, bool>> {};

TEST_P(DdpJoin, UnevenBatchesFinishWithTheClosedFormGradients) {
  const auto [batches, by_world, hooked] = GetParam();
  const int world = static_cast<int>(batches.size());
  const int most = *std::max_element(batches.begin(), batches.end());
  const double lr = 0.1;
  // Closed form: iteration i averages the x of the ranks still training over the world size
  // (by_world) or over those ranks.
  std::vector<double> expected_grad(most);
  double w = 0.5;
  for (int i = 0; i < most; ++i) {
    double sum = 0;
    int active = 0;
    for (int r = 0; r < world; ++r) {
      if (i < batches[r]) {
        sum += x_of(r, i);
        ++active;
      }
    }
    expected_grad[i] = sum / (by_world ? world : active);
    w -= lr * expected_grad[i];
  }
  int last = 0;  // the last rank to join: the highest of those with the most batches
  for (int r = 0; r < world; ++r) {
    if (batches[r] == most) last = r;
  }
  std::vector<double> final_w(world), final_count(world);
  std::vector<int> joiner(world);
  run_ranks(world, [&](int r, std::shared_ptr<parallel::ProcessGroup> pg) {
    Device dev = Device::cpu(r);
    auto net = std::make_shared<Scalar>();
    net->to(dev);
    DistributedDataParallelOptions o;
    o.timeout_ms = 20000;
    o.gradient_as_bucket_view = hooked;
    DistributedDataParallel<Scalar> ddp(net, pg, o);
    if (hooked) ddp.register_comm_hook(parallel::bf16_compress_hook());  // the x's are exact in bf16
    optim::SGD opt(net->parameters(), optim::SGDOptions(lr));
    parallel::JoinOptions jo;
    jo.divide_by_initial_world_size = by_world;
    ddp.join([&] {
      for (int i = 0; i < batches[r]; ++i) {
        opt.zero_grad();
        sum(ddp(full({1}, x_of(r, i), TensorOptions().device(dev)))).backward();
        EXPECT_NEAR(net->w.grad().item(), expected_grad[i], 1e-5) << "rank " << r << " batch " << i;
        opt.step();
      }
    }, jo);
    final_w[r] = net->w.item();
    final_count[r] = net->count.item();
    joiner[r] = ddp.last_joiner();
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_NEAR(final_w[r], w, 1e-5) << "rank " << r;
    // Buffers come from the highest rank still training, and at the end from the last joiner,
    // which ran `most` forwards.
    EXPECT_EQ(final_count[r], most) << "rank " << r;
    EXPECT_EQ(joiner[r], last) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, DdpJoin,
                         ::testing::Values(std::make_tuple(std::vector<int>{3, 5}, false, false),
                                           std::make_tuple(std::vector<int>{3, 5}, true, false),
                                           std::make_tuple(std::vector<int>{3, 5}, false, true),
                                           std::make_tuple(std::vector<int>{5, 3, 4}, false, false),
                                           std::make_tuple(std::vector<int>{2, 2}, true, false)));

// Without join, the rank with 5 batches waits in its 4th iteration for rank 0, whose loop
// ended: a DistributedError naming rank 0 once the group's timeout passes, never a hang.
TEST(DdpUnevenInputs, WithoutJoinTheRankThatStoppedIsNamed) {
  std::latch finished(2);
  std::string error;
  run_ranks(2, [&](int r, std::shared_ptr<parallel::ProcessGroup> pg) {
    Device dev = Device::cpu(r);
    auto net = std::make_shared<Scalar>();
    net->to(dev);
    DistributedDataParallelOptions o;
    o.timeout_ms = 20000;
    DistributedDataParallel<Scalar> ddp(net, pg, o);
    try {
      for (int i = 0; i < (r == 0 ? 3 : 5); ++i) sum(ddp(full({1}, x_of(r, i), TensorOptions().device(dev)))).backward();
    } catch (const DistributedError& e) {
      if (r == 1) error = e.what();
    }
    finished.arrive_and_wait();  // rank 0 stays alive (a loop that ended, not a dead process)
  }, /*group_timeout_ms=*/800);
  EXPECT_THAT(error, HasSubstr("rank 0"));
  EXPECT_THAT(error, HasSubstr("timed out"));
}

// ---- static_graph (Note [Static graph]) --------------------------------------------------------

namespace {

/// Embedding -> tanh -> Linear decoder sharing the embedding's weight (tied after construction).
struct TiedLm : nn::Cloneable<TiedLm> {
  std::shared_ptr<nn::EmbeddingImpl> encoder;
  std::shared_ptr<nn::LinearImpl> decoder;
  TiedLm() : Cloneable("TiedLm") {
    reset();
    decoder->weight = encoder->weight;
    *decoder->find_parameter("weight") = encoder->weight;
  }
  void reset() override {
    encoder = register_module("encoder", std::make_shared<nn::EmbeddingImpl>(9, 5));
    decoder = register_module("decoder", std::make_shared<nn::LinearImpl>(5, 9));
  }
  Tensor forward(const Tensor& ids) { return decoder->forward(tanh(encoder->forward(ids))); }
};

/// `head` is registered first but applied last; `body` is applied twice; `unused` never.
struct TwiceNet : nn::Cloneable<TwiceNet> {
  std::shared_ptr<nn::LinearImpl> head, body, unused;
  TwiceNet() : Cloneable("TwiceNet") { reset(); }
  void reset() override {
    head = register_module("head", std::make_shared<nn::LinearImpl>(6, 3));
    body = register_module("body", std::make_shared<nn::LinearImpl>(6, 6));
    unused = register_module("unused", std::make_shared<nn::LinearImpl>(6, 3));
  }
  Tensor forward(const Tensor& x) { return head->forward(tanh(body->forward(tanh(body->forward(x))))); }
};

Tensor ids_for(int step, int64_t rows) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < rows; ++i) v.push_back((i * 7 + step * 3) % 9);
  return from_vector(v);
}

// Trains M with SGD for `steps` on `world` ranks with static_graph (per_rank rows each, rank r
// taking rows [r * per_rank, ...) of the step's batch) and on one process with the whole batch;
// returns {one process, rank 0, rank 1, ...} parameters. `batch(step, rows)` gives (input, target).
template <class M, class Batch>
std::vector<std::vector<std::vector<float>>> static_graph_run(int world, int steps, Batch batch,
                                                              std::function<void(int, DistributedDataParallel<M>&)> check = {}) {
  const int64_t per_rank = 4;
  static std::mutex seed_mu;
  auto make = [&](Device d) {
    std::lock_guard<std::mutex> lk(seed_mu);
    manual_seed(3);
    auto m = std::make_shared<M>();
    m->to(d);
    return m;
  };
  std::vector<std::vector<std::vector<float>>> out(world + 1);
  {
    auto m = make(Device::cpu());
    optim::SGD opt(m->parameters(), optim::SGDOptions(0.2));
    for (int s = 0; s < steps; ++s) {
      opt.zero_grad();
      auto [x, y] = batch(s, per_rank * world);
      nn::functional::mse_loss(m->forward(x), y).backward();
      opt.step();
    }
    out[0] = params_of(*m);
  }
  run_ranks(world, [&](int r, std::shared_ptr<parallel::ProcessGroup> pg) {
    Device dev = Device::cpu(r);
    auto m = make(dev);
    DistributedDataParallelOptions o;
    o.static_graph = true;
    o.bucket_cap_mb = 1e-6;  // one parameter per bucket: the bucket order is visible
    o.timeout_ms = 20000;
    DistributedDataParallel<M> ddp(m, pg, o);
    optim::SGD opt(m->parameters(), optim::SGDOptions(0.2));
    for (int s = 0; s < steps; ++s) {
      opt.zero_grad();
      auto [x, y] = batch(s, per_rank * world);
      x = native::to(native::narrow(x, 0, r * per_rank, per_rank), dev);
      y = native::to(native::narrow(y, 0, r * per_rank, per_rank), dev);
      nn::functional::mse_loss(ddp(x), y).backward();
      opt.step();
      if (check) check(s, ddp);
    }
    out[r + 1] = params_of(*m);
  });
  return out;
}

}  // namespace

TEST(DdpStaticGraph, TiedEmbeddingsMatchOneProcess) {
  auto got = static_graph_run<TiedLm>(2, 5, [](int s, int64_t rows) {
    return std::make_pair(ids_for(s, rows), native::mul(native::reshape(global_y(s, rows * 3), {rows, 9}), 0.1));
  });
  ASSERT_EQ(got[0].size(), 2u);  // the tied weight is one parameter (Note [Shared parameters])
  expect_close(got[1], got[0], 1e-5);
  expect_close(got[2], got[1], 0);
}

// `body` is used twice per forward, `unused` never (no find_unused_parameters: static_graph
// finds it once); after the second iteration the buckets follow the arrival order: head's
// gradients (backward reaches them first) are in the first buckets, not body's (the reverse
// registration order of the first iteration).
TEST(DdpStaticGraph, ModuleCalledTwiceAndAnUnusedOneMatchOneProcessAndBucketsFollowArrival) {
  std::vector<std::vector<std::vector<size_t>>> buckets_after(2);
  auto got = static_graph_run<TwiceNet>(2, 5, [](int s, int64_t rows) { return std::make_pair(global_x(s, rows), global_y(s, rows)); },
      [&](int s, DistributedDataParallel<TwiceNet>& ddp) {
        if (s < 2) buckets_after[s] = ddp.reducer().bucket_parameter_indices();
      });
  expect_close(std::vector<std::vector<float>>(got[1].begin(), got[1].begin() + 4),
               std::vector<std::vector<float>>(got[0].begin(), got[0].begin() + 4), 1e-5);
  expect_close(got[2], got[1], 0);
  // Parameters: 0 head.weight, 1 head.bias, 2 body.weight, 3 body.bias, 4-5 unused.
  ASSERT_EQ(buckets_after[0].size(), 6u);
  EXPECT_EQ(buckets_after[0][0], (std::vector<size_t>{5}));  // reverse registration: unused.bias first
  std::set<size_t> first_two{buckets_after[1][0][0], buckets_after[1][1][0]};
  EXPECT_EQ(first_two, (std::set<size_t>{0, 1}));
  std::set<size_t> last_two{buckets_after[1][4][0], buckets_after[1][5][0]};
  EXPECT_EQ(last_two, (std::set<size_t>{4, 5}));
}
