#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "core/error.h"
#include "core/generator.h"
#include "data/batch_sampler.h"
#include "data/distributed_sampler.h"
#include "data/random_sampler.h"
#include "data/sequential_sampler.h"
#include "data/subset_random_sampler.h"
#include "data/weighted_random_sampler.h"

namespace ember::data {
namespace {

std::vector<size_t> iota(size_t n, size_t start = 0) {
  std::vector<size_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}
std::vector<size_t> sorted(std::vector<size_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(SequentialSampler, VisitsInOrder) {
  SequentialSampler s(5);
  EXPECT_EQ(s.indices(), iota(5));
  EXPECT_EQ(s.size(), 5u);
}

TEST(RandomSampler, IsAPermutationAndReshufflesEachEpoch) {
  RandomSampler s(100, false, std::nullopt, std::make_shared<Generator>(1));
  auto a = s.indices(), b = s.indices();
  EXPECT_EQ(sorted(a), iota(100));
  EXPECT_EQ(sorted(b), iota(100));
  EXPECT_NE(a, b);
}

TEST(RandomSampler, SameSeedSameOrder) {
  RandomSampler s1(50, false, std::nullopt, std::make_shared<Generator>(7));
  RandomSampler s2(50, false, std::nullopt, std::make_shared<Generator>(7));
  EXPECT_EQ(s1.indices(), s2.indices());
  RandomSampler s3(50, false, std::nullopt, std::make_shared<Generator>(8));
  EXPECT_NE(s1.indices(), s3.indices());
}

TEST(RandomSampler, WithoutGeneratorFollowsManualSeed) {
  RandomSampler s(50);
  manual_seed(3);
  auto a = s.indices();
  manual_seed(3);
  EXPECT_EQ(s.indices(), a);
}

TEST(RandomSampler, ReplacementDrawsNumSamplesInRange) {
  RandomSampler s(4, true, 1000, std::make_shared<Generator>(2));
  auto v = s.indices();
  ASSERT_EQ(v.size(), 1000u);
  EXPECT_EQ(s.size(), 1000u);
  std::set<size_t> seen(v.begin(), v.end());
  EXPECT_EQ(seen, (std::set<size_t>{0, 1, 2, 3}));
}

TEST(RandomSampler, MoreSamplesThanItemsConcatenatesPermutations) {
  RandomSampler s(4, false, 10, std::make_shared<Generator>(2));
  auto v = s.indices();
  ASSERT_EQ(v.size(), 10u);
  EXPECT_EQ(sorted({v.begin(), v.begin() + 4}), iota(4));
  EXPECT_EQ(sorted({v.begin() + 4, v.begin() + 8}), iota(4));
}

TEST(RandomSampler, ZeroNumSamplesIsValueError) { EXPECT_THROW(RandomSampler(3, false, 0), ValueError); }

TEST(SubsetRandomSampler, PermutesTheGivenIndices) {
  SubsetRandomSampler s({3, 9, 27, 81}, std::make_shared<Generator>(4));
  EXPECT_EQ(sorted(s.indices()), (std::vector<size_t>{3, 9, 27, 81}));
}

TEST(WeightedRandomSampler, FrequenciesFollowWeightsAndZeroIsNeverDrawn) {
  WeightedRandomSampler s({0.0, 1.0, 3.0}, 40000, true, std::make_shared<Generator>(5));
  auto v = s.indices();
  size_t c[3] = {0, 0, 0};
  for (size_t i : v) c[i]++;
  EXPECT_EQ(c[0], 0u);
  EXPECT_NEAR(static_cast<double>(c[2]) / 40000.0, 0.75, 0.02);
}

TEST(WeightedRandomSampler, WithoutReplacementDrawsDistinctPositiveIndices) {
  WeightedRandomSampler s({1, 0, 2, 5, 1}, 4, false, std::make_shared<Generator>(6));
  auto v = s.indices();
  EXPECT_EQ(sorted(v), (std::vector<size_t>{0, 2, 3, 4}));
  EXPECT_THROW(WeightedRandomSampler({1, 0}, 2, false), ValueError);
  EXPECT_THROW(WeightedRandomSampler({1, -1}, 1), ValueError);
}

TEST(WeightedRandomSampler, HeavyWeightComesFirstMostOftenWithoutReplacement) {
  auto g = std::make_shared<Generator>(9);
  WeightedRandomSampler s({1, 1, 8}, 1, false, g);
  int first2 = 0;
  for (int i = 0; i < 2000; ++i) first2 += s.indices()[0] == 2;
  EXPECT_NEAR(first2 / 2000.0, 0.8, 0.04);
}

TEST(BatchSampler, GroupsAndDropsLast) {
  auto seq = std::make_shared<SequentialSampler>(10);
  BatchSampler keep(seq, 3, false), drop(seq, 3, true);
  auto k = keep.batches();
  ASSERT_EQ(k.size(), 4u);
  EXPECT_EQ(keep.size(), 4u);
  EXPECT_EQ(k[3], (std::vector<size_t>{9}));
  EXPECT_EQ(drop.batches().size(), 3u);
  EXPECT_EQ(drop.size(), 3u);
  EXPECT_THROW(BatchSampler(seq, 0, false), ValueError);
}

TEST(DistributedSampler, PadsByRepeatingSoShardsAreEqual) {
  // 10 items over 3 replicas: 4 each, 12 in all, the 2 extra repeat the list's start.
  std::vector<size_t> all;
  for (size_t r = 0; r < 3; ++r) {
    DistributedSampler s(10, 3, r, /*shuffle=*/false);
    EXPECT_EQ(s.size(), 4u);
    EXPECT_EQ(s.total_size(), 12u);
    auto v = s.indices();
    ASSERT_EQ(v.size(), 4u);
    all.insert(all.end(), v.begin(), v.end());
  }
  EXPECT_EQ(sorted(all), (std::vector<size_t>{0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(DistributedSampler(10, 3, 0, false).indices(), (std::vector<size_t>{0, 3, 6, 9}));
  EXPECT_EQ(DistributedSampler(10, 3, 1, false).indices(), (std::vector<size_t>{1, 4, 7, 0}));
}

TEST(DistributedSampler, PadsSeveralTimesOverForTinyDatasets) {
  DistributedSampler s(2, 5, 4, false);
  EXPECT_EQ(s.indices(), (std::vector<size_t>{0}));  // [0,1,0,1,0] -> rank 4 takes position 4
}

TEST(DistributedSampler, DropLastGivesDisjointEqualShards) {
  std::vector<size_t> all;
  for (size_t r = 0; r < 3; ++r) {
    DistributedSampler s(10, 3, r, true, 11, /*drop_last=*/true);
    EXPECT_EQ(s.size(), 3u);
    auto v = s.indices();
    all.insert(all.end(), v.begin(), v.end());
  }
  std::set<size_t> uniq(all.begin(), all.end());
  EXPECT_EQ(all.size(), 9u);
  EXPECT_EQ(uniq.size(), 9u);
}

TEST(DistributedSampler, ShuffledShardsPartitionTheDatasetAndChangeWithEpoch) {
  std::vector<size_t> all;
  std::vector<std::vector<size_t>> e0;
  for (size_t r = 0; r < 4; ++r) {
    DistributedSampler s(100, 4, r, true, 42);
    e0.push_back(s.indices());
    all.insert(all.end(), e0.back().begin(), e0.back().end());
    s.set_epoch(1);
    EXPECT_NE(s.indices(), e0.back());
    s.set_epoch(0);
    EXPECT_EQ(s.indices(), e0.back());  // seeded with seed + epoch: reproducible
  }
  EXPECT_EQ(sorted(all), iota(100));
}

// Note [Global sample position]: one epoch's order is the same for every number of replicas,
// and a resumed epoch continues it at the global position, whatever the replicas are now.
TEST(DistributedSampler, StartIndexResumesTheEpochAtTheSameGlobalSampleOnAnyNumberOfReplicas) {
  DistributedSampler whole(48, 1, 0, true, 7);
  whole.set_epoch(3);
  const std::vector<size_t> order = whole.indices();
  ASSERT_EQ(sorted(order), iota(48));
  for (size_t replicas : {1u, 2u, 3u, 4u}) {
    for (size_t start : {0u, 12u, 24u, 47u, 48u}) {
      SCOPED_TRACE("replicas " + std::to_string(replicas) + ", start " + std::to_string(start));
      std::vector<size_t> seen;
      for (size_t r = 0; r < replicas; ++r) {
        DistributedSampler s(48, replicas, r, true, 7);
        s.set_epoch(3);
        s.set_start_index(start);
        EXPECT_EQ(s.start_index(), start);
        const auto v = s.indices();
        EXPECT_EQ(v.size(), s.size());
        for (size_t k = 0; k < v.size() && start + r + k * replicas < 48; ++k)
          EXPECT_EQ(v[k], order[start + r + k * replicas]) << "replica " << r << ", index " << k;
        for (size_t k = 0; k < v.size() && start + r + k * replicas < 48; ++k) seen.push_back(v[k]);
      }
      // Together the replicas visit exactly the positions from start on.
      EXPECT_EQ(sorted(seen), sorted(std::vector<size_t>(order.begin() + static_cast<std::ptrdiff_t>(start), order.end())));
    }
  }
}

TEST(DistributedSampler, SetEpochStartsTheNextEpochAtItsBeginning) {
  DistributedSampler s(10, 2, 1, false);
  s.set_start_index(6);
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(s.indices(), (std::vector<size_t>{7, 9}));
  s.set_epoch(1);
  EXPECT_EQ(s.start_index(), 0u);
  EXPECT_EQ(s.indices(), (std::vector<size_t>{1, 3, 5, 7, 9}));
  EXPECT_THROW(s.set_start_index(11), ValueError);
}

TEST(DistributedSampler, PaddingAfterAStartIndexRepeatsTheRemainingStart) {
  // Positions 4..9 (6 left) over 4 replicas: 2 each, the 2 extra repeat positions 4 and 5.
  std::vector<size_t> all;
  for (size_t r = 0; r < 4; ++r) {
    DistributedSampler s(10, 4, r, false);
    s.set_start_index(4);
    auto v = s.indices();
    all.insert(all.end(), v.begin(), v.end());
  }
  EXPECT_EQ(sorted(all), (std::vector<size_t>{4, 4, 5, 5, 6, 7, 8, 9}));
}

TEST(DistributedSampler, UnevenShardsAreNotPaddedAndDifferByAtMostOne) {
  DistributedSamplerOptions o;
  o.shuffle = false;
  o.even = false;
  std::vector<size_t> all, sizes;
  for (size_t r = 0; r < 3; ++r) {
    DistributedSampler s(10, 3, r, o);
    auto v = s.indices();
    EXPECT_EQ(v.size(), s.size());
    sizes.push_back(v.size());
    all.insert(all.end(), v.begin(), v.end());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{4, 3, 3}));
  EXPECT_EQ(sorted(all), iota(10));  // each index once
  DistributedSampler tiny(2, 4, 3, o);
  EXPECT_EQ(tiny.size(), 0u);
  EXPECT_TRUE(tiny.indices().empty());
  o.drop_last = true;
  EXPECT_THROW(DistributedSampler(10, 3, 0, o), ValueError);
}

TEST(DistributedSampler, InvalidRankIsValueError) {
  EXPECT_THROW(DistributedSampler(10, 2, 2), ValueError);
  EXPECT_THROW(DistributedSampler(10, 0, 0), ValueError);
}

}  // namespace
}  // namespace ember::data
