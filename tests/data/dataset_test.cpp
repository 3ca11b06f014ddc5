#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/ops/factory.h"
#include "data/concat_dataset.h"
#include "data/map_dataset.h"
#include "data/subset.h"
#include "data/tensor_dataset.h"

namespace ember::data {
namespace {

struct Range : Dataset<int64_t> {
  explicit Range(size_t n, int64_t base = 0) : n(n), base(base) {}
  int64_t get(size_t i) override { return base + static_cast<int64_t>(i); }
  size_t size() const override { return n; }
  size_t n;
  int64_t base;
};

TEST(TensorDataset, RowsAreViewsOfEachTensor) {
  Tensor x = from_vector<int64_t>({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor y = from_vector<float>({10, 20, 30});
  TensorDataset ds({x, y});
  EXPECT_EQ(ds.size(), 3u);
  auto row = ds.get(1);
  ASSERT_EQ(row.size(), 2u);
  EXPECT_EQ(row[0].to_vector<int64_t>(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(row[1].item<float>(), 20.f);
  EXPECT_TRUE(row[0].storage().is_same(x.storage()));
  EXPECT_THROW(ds.get(3), IndexError);
  EXPECT_THROW(TensorDataset({x, from_vector<float>({1, 2})}), ValueError);
}

TEST(Subset, MapsIndices) {
  auto base = std::make_shared<Range>(10);
  Subset<Range> s(base, {7, 2});
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(s.get(0), 7);
  EXPECT_EQ(s.get(1), 2);
  EXPECT_THROW(s.get(2), IndexError);
}

TEST(ConcatDataset, IndexesAcrossParts) {
  ConcatDataset<Range> c({std::make_shared<Range>(3, 0), std::make_shared<Range>(0, 50), std::make_shared<Range>(2, 100)});
  EXPECT_EQ(c.size(), 5u);
  EXPECT_EQ(c.get(2), 2);
  EXPECT_EQ(c.get(3), 100);
  EXPECT_EQ(c.get(4), 101);
  EXPECT_THROW(c.get(5), IndexError);
}

TEST(MapDataset, TransformAppliesFunction) {
  auto ds = transform(std::make_shared<Range>(4), [](int64_t v) { return std::to_string(v * 2); });
  static_assert(std::is_same_v<decltype(ds)::SampleType, std::string>);
  EXPECT_EQ(ds.get(3), "6");
  EXPECT_EQ(ds.size(), 4u);
}

TEST(RandomSplit, PartitionsWithoutOverlapAndIsSeeded) {
  auto base = std::make_shared<Range>(10);
  auto parts = random_split(base, {3, 7}, std::make_shared<Generator>(1));
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].size(), 3u);
  EXPECT_EQ(parts[1].size(), 7u);
  std::set<int64_t> all;
  for (auto& p : parts)
    for (size_t i = 0; i < p.size(); ++i) all.insert(p.get(i));
  EXPECT_EQ(all.size(), 10u);
  auto again = random_split(base, {3, 7}, std::make_shared<Generator>(1));
  EXPECT_EQ(again[0].indices(), parts[0].indices());
  EXPECT_THROW(random_split(base, {3, 8}), ValueError);
}

TEST(RandomSplit, FractionsDealTheRemainderRoundRobin) {
  auto parts = random_split_fractions(std::make_shared<Range>(10), {0.33, 0.33, 0.34}, std::make_shared<Generator>(2));
  EXPECT_EQ(parts[0].size() + parts[1].size() + parts[2].size(), 10u);
  EXPECT_EQ(parts[0].size(), 4u);  // floor: 3, 3, 3, then one extra to the first
  EXPECT_THROW(random_split_fractions(std::make_shared<Range>(10), {0.5, 0.2}), ValueError);
}

}  // namespace
}  // namespace ember::data
