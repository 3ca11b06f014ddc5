// DataLoader behaviour: batching, order, worker processes, seeding, iterable datasets,
// persistent workers.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "core/ops/factory.h"
#include "core/ops/random.h"
#include "data/dataloader.h"
#include "data/map_dataset.h"
#include "data/pad_collate.h"
#include "data/tensor_dataset.h"
#include "data/worker_info.h"
#include "tests/data/test_util.h"

namespace ember::data {
namespace {

using testing::child_pids;
using testing::batch_mappings;

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

// Sample i is i; also reports which process made it.
struct Numbers : Dataset<std::pair<int64_t, int64_t>> {
  explicit Numbers(size_t n) : n(n) {}
  std::pair<int64_t, int64_t> get(size_t i) override {
    auto info = get_worker_info();
    return {static_cast<int64_t>(i), info ? info->id : -1};
  }
  size_t size() const override { return n; }
  size_t n;
};

TEST(DataLoader, MainProcessBatchesInOrder) {
  DataLoader loader(std::make_shared<Numbers>(10), DataLoaderOptions{.batch_size = 4});
  EXPECT_EQ(loader.size(), 3u);
  std::vector<std::vector<int64_t>> got;
  for (auto& [x, who] : loader) {
    got.push_back(ints(x));
    EXPECT_EQ(ints(who), std::vector<int64_t>(x.numel(), -1));  // get_worker_info() is empty here
  }
  EXPECT_EQ(got, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  DataLoader dropping(std::make_shared<Numbers>(10), DataLoaderOptions{.batch_size = 4, .drop_last = true});
  EXPECT_EQ(dropping.size(), 2u);
  size_t n = 0;
  for (auto& b : dropping) n += b.first.numel();
  EXPECT_EQ(n, 8u);
}

TEST(DataLoader, WorkersKeepSamplerOrderAndRoundRobin) {
  DataLoader loader(std::make_shared<Numbers>(23), DataLoaderOptions{.batch_size = 3, .num_workers = 3});
  int64_t expect = 0, batch = 0;
  for (auto& [x, who] : loader) {
    for (int64_t v : ints(x)) EXPECT_EQ(v, expect++);
    for (int64_t w : ints(who)) EXPECT_EQ(w, batch % 3);
    ++batch;
  }
  EXPECT_EQ(expect, 23);
  EXPECT_EQ(batch, 8);
  EXPECT_TRUE(child_pids().empty());
  EXPECT_EQ(batch_mappings(), 0u);
}

// Worker 0 is slow: the reorder buffer must still hand batches out in order.
struct SlowFirstWorker : Dataset<int64_t> {
  int64_t get(size_t i) override {
    auto info = get_worker_info();
    if (info && info->id == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return static_cast<int64_t>(i);
  }
  size_t size() const override { return 40; }
};

TEST(DataLoader, OrderSurvivesUnevenWorkers) {
  DataLoader loader(std::make_shared<SlowFirstWorker>(),
                    DataLoaderOptions{.batch_size = 2, .num_workers = 2, .prefetch_factor = 4});
  int64_t expect = 0;
  for (auto& x : loader)
    for (int64_t v : ints(x)) EXPECT_EQ(v, expect++);
  EXPECT_EQ(expect, 40);
}

TEST(DataLoader, WorkersMatchMainProcessForTheSameSeed) {
  Tensor x = arange(0, 50, 1, TensorOptions(kFloat32));
  Tensor y = arange(100, 150, 1, TensorOptions(kInt64));
  auto ds = std::make_shared<TensorDataset>(std::vector<Tensor>{x, y});
  auto run = [&](int workers) {
    DataLoader loader(ds, DataLoaderOptions{.batch_size = 8, .shuffle = true, .num_workers = workers,
                                            .generator = std::make_shared<Generator>(123)});
    std::vector<std::vector<float>> out;
    for (auto& row : loader) {
      EXPECT_EQ(row.size(), 2u);
      auto xs = row[0].to_vector<float>();
      auto ys = ints(row[1]);
      for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(static_cast<int64_t>(xs[i]) + 100, ys[i]);
      out.push_back(xs);
    }
    return out;
  };
  auto a = run(0), b = run(2);
  EXPECT_EQ(a.size(), 7u);
  EXPECT_EQ(a, b);
}

TEST(DataLoader, BatchesViewSharedMemoryThatOutlivesTheLoader) {
  std::vector<std::pair<Tensor, Tensor>> kept;
  {
    // Rows of 2048 int64: each batch is two [4, 2048] tensors, 128 KiB, above the size that
    // travels inline (Note [Inline batches]), so it comes in a shared buffer.
    auto ds = std::make_shared<TensorDataset>(std::vector<Tensor>{arange(0, 12, 1, TensorOptions(kInt64))});
    DataLoader loader(transform(ds, [](std::vector<Tensor> r) { return native::expand(r[0], {2048}); }),
                      DataLoaderOptions{.batch_size = 4, .num_workers = 2},
                      [](std::vector<Tensor> s) { return std::make_pair(native::stack(s, 0), native::stack(s, 0)); });
    for (auto& b : loader) kept.push_back(b);
    // One mapping per batch still alive (both of its tensors view it), of a nameless memfd.
    EXPECT_EQ(batch_mappings(), 3u);
  }
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(ints(native::select(kept[2].first, 1, 2047)), (std::vector<int64_t>{8, 9, 10, 11}));
  // Both tensors of a batch live in one segment: offsets differ within the same mapping.
  EXPECT_NE(kept[2].first.raw_data(), kept[2].second.raw_data());
  kept[0].first.data_ptr<int64_t>()[0] = 42;  // writable
  EXPECT_EQ(ints(kept[0].first)[0], 42);
  kept.clear();
  EXPECT_EQ(batch_mappings(), 0u);  // the last tensor of a batch unmaps it
}

// Note [Inline batches]: a batch of at most 32 KiB comes through the worker's socket and lives
// in the parent's own memory: no shared-memory mapping, the same values, writable, outliving
// the loader and its workers.
TEST(DataLoader, SmallBatchesComeInlineAndOutliveTheLoader) {
  std::vector<std::pair<Tensor, Tensor>> kept;
  {
    auto ds = std::make_shared<TensorDataset>(std::vector<Tensor>{arange(0, 12, 1, TensorOptions(kInt64))});
    DataLoader loader(transform(ds, [](std::vector<Tensor> r) { return r[0]; }), DataLoaderOptions{.batch_size = 4, .num_workers = 2},
                      [](std::vector<Tensor> s) { return std::make_pair(native::stack(s, 0), native::mul(native::stack(s, 0), 2)); });
    for (auto& b : loader) {
      kept.push_back(b);
      EXPECT_EQ(batch_mappings(), 0u);
    }
  }
  ASSERT_EQ(kept.size(), 3u);
  for (int b = 0; b < 3; ++b) {
    std::vector<int64_t> want, twice;
    for (int64_t i = 4 * b; i < 4 * b + 4; ++i) want.push_back(i), twice.push_back(2 * i);
    EXPECT_EQ(ints(kept[static_cast<size_t>(b)].first), want);
    EXPECT_EQ(ints(kept[static_cast<size_t>(b)].second), twice);
  }
  EXPECT_NE(kept[2].first.raw_data(), kept[2].second.raw_data());
  kept[0].first.data_ptr<int64_t>()[0] = 42;  // writable
  EXPECT_EQ(ints(kept[0].first)[0], 42);
}

// The FAQ's bug: an RNG seeded when the dataset is built is copied into every worker.
struct MtDataset : Dataset<int64_t> {
  std::mt19937 rng{12345};
  int64_t get(size_t) override { return static_cast<int64_t>(rng()); }
  size_t size() const override { return 8; }
};

std::vector<std::vector<int64_t>> collect(auto& loader) {
  std::vector<std::vector<int64_t>> out;
  for (auto& b : loader) out.push_back(ints(b));
  return out;
}

TEST(DataLoaderSeeding, ConstructorSeededRngRepeatsInEveryWorker) {
  DataLoader loader(std::make_shared<MtDataset>(), DataLoaderOptions{.batch_size = 4, .num_workers = 2});
  auto b = collect(loader);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], b[1]);  // worker 0 and worker 1 drew the very same numbers
}

TEST(DataLoaderSeeding, WorkerInitFnSeedingFromWorkerInfoMakesThemDiffer) {
  std::vector<int> seen_ids;
  DataLoaderOptions o{.batch_size = 4, .num_workers = 2};
  o.worker_init_fn = [](int id) {
    auto info = get_worker_info();
    EMBER_CHECK(info && info->id == id && info->num_workers == 2, "bad worker info");
    info->dataset_as<MtDataset>()->rng.seed(static_cast<uint32_t>(info->seed));
  };
  DataLoader loader(std::make_shared<MtDataset>(), o);
  auto b = collect(loader);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_NE(b[0], b[1]);
}

struct EmberRandDataset : Dataset<double> {
  double get(size_t) override { return rand({1}).item(); }
  size_t size() const override { return 8; }
};

TEST(DataLoaderSeeding, EmberRandomNumbersDifferAcrossWorkersWithoutInitFn) {
  DataLoader loader(std::make_shared<EmberRandDataset>(), DataLoaderOptions{.batch_size = 4, .num_workers = 2});
  std::vector<std::vector<double>> b;
  for (auto& t : loader) b.push_back(t.to_vector<double>());
  ASSERT_EQ(b.size(), 2u);
  EXPECT_NE(b[0], b[1]);
}

TEST(DataLoaderSeeding, SameGeneratorSeedSameBatchesEveryRun) {
  auto run = [](uint64_t seed) {
    DataLoader loader(std::make_shared<EmberRandDataset>(),
                      DataLoaderOptions{.batch_size = 2, .shuffle = true, .num_workers = 2,
                                        .generator = std::make_shared<Generator>(seed)});
    std::vector<std::vector<double>> b;
    for (auto& t : loader) b.push_back(t.to_vector<double>());
    return b;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(DataLoaderSeeding, WorkerSeedIsBaseSeedPlusId) {
  DataLoaderOptions o{.batch_size = 1, .num_workers = 2, .generator = std::make_shared<Generator>(99)};
  struct Seeds : Dataset<int64_t> {
    int64_t get(size_t) override { return static_cast<int64_t>(get_worker_info()->seed); }
    size_t size() const override { return 2; }
  };
  DataLoader loader(std::make_shared<Seeds>(), o);
  std::vector<uint64_t> seeds;  // read raw: to_vector goes through double
  for (auto& t : loader) seeds.push_back(static_cast<uint64_t>(t.data_ptr<int64_t>()[0]));
  Generator g(99);
  uint64_t base = g.next_u64();
  ASSERT_EQ(seeds.size(), 2u);
  EXPECT_EQ(seeds[0], base);
  EXPECT_EQ(seeds[1], base + 1);
}

// Splits [0, n) between workers as PyTorch's docs do for an IterableDataset.
struct RangeStream : IterableDataset<int64_t> {
  explicit RangeStream(int64_t n) : n(n) {}
  void reset() override {
    auto info = get_worker_info();
    int64_t per = info ? (n + info->num_workers - 1) / info->num_workers : n;
    int64_t id = info ? info->id : 0;
    cur = id * per;
    end = std::min(n, cur + per);
  }
  std::optional<int64_t> next() override {
    if (cur >= end) return std::nullopt;
    return cur++;
  }
  int64_t n, cur = 0, end = 0;
};

TEST(DataLoaderIterable, MainProcessStreamsEverything) {
  DataLoader loader(std::make_shared<RangeStream>(7), DataLoaderOptions{.batch_size = 3});
  EXPECT_EQ(collect(loader), (std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6}}));
  EXPECT_THROW(loader.size(), TypeError);
}

TEST(DataLoaderIterable, WorkersSplitTheStreamAndBatchesInterleave) {
  DataLoader loader(std::make_shared<RangeStream>(20), DataLoaderOptions{.batch_size = 3, .num_workers = 2});
  for (int epoch = 0; epoch < 2; ++epoch) {
    auto b = collect(loader);
    // worker 0 has 0..9, worker 1 has 10..19; batches alternate between them.
    ASSERT_EQ(b.size(), 8u);
    EXPECT_EQ(b[0], (std::vector<int64_t>{0, 1, 2}));
    EXPECT_EQ(b[1], (std::vector<int64_t>{10, 11, 12}));
    EXPECT_EQ(b[6], (std::vector<int64_t>{9}));
    EXPECT_EQ(b[7], (std::vector<int64_t>{19}));
    std::multiset<int64_t> all;
    for (auto& v : b) all.insert(v.begin(), v.end());
    EXPECT_EQ(all.size(), 20u);
    EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), 20u);
  }
  EXPECT_TRUE(child_pids().empty());
}

TEST(DataLoaderIterable, PersistentWorkersRestartTheStreamEachEpoch) {
  DataLoader loader(std::make_shared<RangeStream>(9),
                    DataLoaderOptions{.batch_size = 2, .num_workers = 3, .persistent_workers = true});
  auto a = collect(loader);
  auto pids = loader.persistent_worker_pids();
  auto b = collect(loader);
  EXPECT_EQ(a, b);
  EXPECT_EQ(loader.persistent_worker_pids(), pids);
}

TEST(DataLoader, PersistentWorkersAreReusedAcrossEpochs) {
  DataLoader loader(std::make_shared<Numbers>(10),
                    DataLoaderOptions{.batch_size = 2, .num_workers = 2, .persistent_workers = true});
  auto epoch = [&] {
    std::vector<int64_t> v;
    for (auto& [x, who] : loader)
      for (int64_t i : ints(x)) v.push_back(i);
    return v;
  };
  auto a = epoch();
  auto pids = loader.persistent_worker_pids();
  ASSERT_EQ(pids.size(), 2u);
  // An epoch abandoned early: batches in flight are drained, workers stay.
  for (auto& b : loader) {
    (void)b;
    break;
  }
  auto b = epoch();
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 10u);
  EXPECT_EQ(loader.persistent_worker_pids(), pids);
  EXPECT_EQ(child_pids().size(), 2u);
  EXPECT_EQ(batch_mappings(), 0u);
}

TEST(DataLoader, PersistentWorkersAreReapedWithTheLoader) {
  {
    DataLoader loader(std::make_shared<Numbers>(4),
                      DataLoaderOptions{.batch_size = 2, .num_workers = 2, .persistent_workers = true});
    for (auto& b : loader) (void)b;
    EXPECT_EQ(child_pids().size(), 2u);
  }
  EXPECT_TRUE(child_pids().empty());
}

TEST(DataLoader, MapBatchesTravelFromWorkers) {
  struct Dict : Dataset<std::map<std::string, Tensor>> {
    std::map<std::string, Tensor> get(size_t i) override {
      return {{"x", full({2}, static_cast<double>(i))}, {"id", from_vector<int64_t>({static_cast<int64_t>(i)}, {1})}};
    }
    size_t size() const override { return 6; }
  };
  DataLoader loader(std::make_shared<Dict>(), DataLoaderOptions{.batch_size = 3, .num_workers = 2});
  int n = 0;
  for (auto& m : loader) {
    EXPECT_EQ(m.at("x").sizes(), (IntList{3, 2}));
    EXPECT_EQ(ints(m.at("id")), (std::vector<int64_t>{3 * n, 3 * n + 1, 3 * n + 2}));
    ++n;
  }
  EXPECT_EQ(n, 2);
}

TEST(DataLoader, PadCollateThroughWorkers) {
  struct Seqs : Dataset<Tensor> {
    Tensor get(size_t i) override { return full({static_cast<int64_t>(i % 4 + 1)}, 1.0, TensorOptions(kInt64)); }
    size_t size() const override { return 8; }
  };
  DataLoader loader(std::make_shared<Seqs>(), DataLoaderOptions{.batch_size = 4, .num_workers = 2},
                    PadCollate(0, /*batch_first=*/true));
  for (auto& [p, len] : loader) {
    EXPECT_EQ(p.sizes(), (IntList{4, 4}));
    EXPECT_EQ(ints(len), (std::vector<int64_t>{1, 2, 3, 4}));
    EXPECT_EQ(ints(native::sum(p)), (std::vector<int64_t>{10}));
  }
}

TEST(DataLoader, OptionsFollowPyTorchRules) {
  auto ds = std::make_shared<Numbers>(4);
  auto seq = std::make_shared<SequentialSampler>(4);
  EXPECT_THROW(DataLoader(ds, DataLoaderOptions{.shuffle = true, .sampler = seq}), ValueError);
  EXPECT_THROW(DataLoader(ds, DataLoaderOptions{.batch_size = 2,
                                                .batch_sampler = std::make_shared<BatchSampler>(seq, 2, false)}),
               ValueError);
  EXPECT_THROW(DataLoader(ds, DataLoaderOptions{.persistent_workers = true}), ValueError);
  EXPECT_THROW(DataLoader(ds, DataLoaderOptions{.num_workers = -1}), ValueError);
  EXPECT_THROW(DataLoader(std::make_shared<RangeStream>(3), DataLoaderOptions{.shuffle = true}), ValueError);
  DataLoader with_bs(ds, DataLoaderOptions{.batch_sampler = std::make_shared<BatchSampler>(seq, 3, false)});
  EXPECT_EQ(with_bs.size(), 2u);
}

}  // namespace
}  // namespace ember::data
