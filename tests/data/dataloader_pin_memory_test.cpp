// The DataLoader's pin_memory option (Note [Pinned batches] in data/detail/pin_batch.h). Over the
// fake pinned backend of tests/support/fake_pinned_backend.h (installed as the process's pinned
// allocator, so this runs without CUDA): every tensor of a nested batch arrives pinned, from the
// calling thread and from worker processes, with the values an unpinned loader gives, and each
// batch's blocks go back to the pinned cache when the next batch is asked for; a batch type with
// a pin_memory() member is pinned by it. Without a CUDA device (and no fake): batches arrive in
// ordinary memory with one warning per process, as PyTorch does.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/ops/factory.h"
#include "core/pinned_memory.h"
#include "data/dataloader.h"
#include "data/pad_collate.h"
#include "tests/support/fake_pinned_backend.h"

namespace ember::data {
namespace {
using Fake = test_support::FakePinnedBackend;
using test_support::ScopedFakePinnedAllocator;

// Sample i: {"x": [i, i, i] (float), "id": [i] (int64)}; batches are maps of two tensors.
struct Dict : Dataset<std::map<std::string, Tensor>> {
  std::map<std::string, Tensor> get(size_t i) override {
    return {{"x", full({3}, static_cast<double>(i))}, {"id", from_vector<int64_t>({static_cast<int64_t>(i)}, {1})}};
  }
  size_t size() const override { return 10; }
};

using Flat = std::vector<std::pair<std::vector<float>, bool>>;  // per batch tensor: values, pinned

template <class Loader>
std::vector<Flat> run_epoch(Loader& loader) {
  std::vector<Flat> out;
  for (auto& batch : loader) {
    Flat f;
    for_each_tensor(batch, [&](const Tensor& t) { f.emplace_back(t.to_vector<float>(), t.is_pinned()); });
    out.push_back(std::move(f));
  }
  return out;
}

class DataLoaderPinMemory : public ::testing::TestWithParam<int> {};  // num_workers

TEST_P(DataLoaderPinMemory, NestedBatchesArrivePinnedWithTheSameValues) {
  ScopedFakePinnedAllocator fake;
  DataLoader plain(std::make_shared<Dict>(), DataLoaderOptions{.batch_size = 4, .num_workers = GetParam()});
  DataLoader pinned(std::make_shared<Dict>(),
                    DataLoaderOptions{.batch_size = 4, .num_workers = GetParam(), .pin_memory = true});
  EXPECT_FALSE(plain.pins_memory());
  EXPECT_TRUE(pinned.pins_memory());
  const std::vector<Flat> want = run_epoch(plain);
  EXPECT_EQ(Fake::allocs, 0) << "pin_memory=false pinned something";
  const std::vector<Flat> got = run_epoch(pinned);
  ASSERT_EQ(got.size(), 3u);
  ASSERT_EQ(got.size(), want.size());
  for (size_t b = 0; b < got.size(); ++b) {
    ASSERT_EQ(got[b].size(), 2u);
    for (size_t t = 0; t < got[b].size(); ++t) {
      EXPECT_TRUE(got[b][t].second) << "batch " << b << " tensor " << t << " is not pinned";
      EXPECT_FALSE(want[b][t].second);
      EXPECT_EQ(got[b][t].first, want[b][t].first) << "batch " << b << " tensor " << t;
    }
  }
  // Each batch is dropped before the next is pinned: its two blocks are reused, not new ones.
  EXPECT_EQ(fake.allocator().stats().allocated_bytes, 0) << "a pinned batch was not freed";
  EXPECT_EQ(Fake::allocs, 2) << "pinned blocks were not reused across batches";
  EXPECT_EQ(fake.allocator().stats().cached_blocks, 2);
}

INSTANTIATE_TEST_SUITE_P(Workers, DataLoaderPinMemory, ::testing::Values(0, 2),
                         [](const auto& info) { return "num_workers_" + std::to_string(info.param); });

TEST(DataLoaderPinMemoryFake, PaddedBatchesFromWorkersArePinned) {
  ScopedFakePinnedAllocator fake;
  struct Seqs : Dataset<Tensor> {
    Tensor get(size_t i) override { return full({static_cast<int64_t>(i % 3 + 1)}, 1.0, TensorOptions(kInt64)); }
    size_t size() const override { return 6; }
  };
  DataLoader loader(std::make_shared<Seqs>(), DataLoaderOptions{.batch_size = 3, .num_workers = 2, .pin_memory = true},
                    PadCollate(0, /*batch_first=*/true));
  int n = 0;
  for (auto& [padded, lengths] : loader) {
    EXPECT_TRUE(padded.is_pinned());
    EXPECT_TRUE(lengths.is_pinned());
    EXPECT_EQ(padded.sizes(), (IntList{3, 3}));
    EXPECT_EQ(lengths.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
    ++n;
  }
  EXPECT_EQ(n, 2);
}

TEST(DataLoaderPinMemoryFake, PlainTensorBatchesArePinned) {
  ScopedFakePinnedAllocator fake;
  struct Rows : Dataset<Tensor> {
    Tensor get(size_t i) override { return full({2}, static_cast<double>(i)); }
    size_t size() const override { return 4; }
  };
  DataLoader loader(std::make_shared<Rows>(), DataLoaderOptions{.batch_size = 4, .num_workers = 1, .pin_memory = true});
  int n = 0;
  for (Tensor& b : loader) {
    EXPECT_TRUE(b.is_pinned());
    EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{0, 0, 1, 1, 2, 2, 3, 3}));
    ++n;
  }
  EXPECT_EQ(n, 1);
}

// A batch type of its own with a pin_memory() member, as PyTorch's custom batches.
struct OwnBatch {
  Tensor x;
  bool pinned_by_member = false;
  OwnBatch pin_memory() const { return OwnBatch{native::pin_memory(x), true}; }
};
}  // namespace
}  // namespace ember::data

// Walkable (and so sendable from workers, data/batch_codec.h) like nn's PackedSequence.
template <>
struct ember::NestedTensors<ember::data::OwnBatch> {
  static constexpr bool enabled = true;
  template <class F>
  static void for_each(const ember::data::OwnBatch& v, F&& f) { f(v.x); }
  template <class F>
  static ember::data::OwnBatch map(const ember::data::OwnBatch& v, F&& f) {
    return ember::data::OwnBatch{f(v.x), v.pinned_by_member};
  }
};

namespace ember::data {
namespace {
struct OwnCollate {
  OwnBatch operator()(std::vector<Tensor> samples) const { return OwnBatch{native::stack(samples, 0)}; }
};

TEST(DataLoaderPinMemoryFake, BatchTypeWithAPinMemoryMemberIsPinnedByIt) {
  ScopedFakePinnedAllocator fake;
  struct Rows : Dataset<Tensor> {
    Tensor get(size_t i) override { return full({2}, static_cast<double>(i)); }
    size_t size() const override { return 4; }
  };
  DataLoader loader(std::make_shared<Rows>(), DataLoaderOptions{.batch_size = 2, .pin_memory = true}, OwnCollate{});
  int n = 0;
  for (auto& b : loader) {
    EXPECT_TRUE(b.pinned_by_member);
    EXPECT_TRUE(b.x.is_pinned());
    EXPECT_EQ(b.x.to_vector<float>(), (std::vector<float>{2.f * n, 2.f * n, 2.f * n + 1, 2.f * n + 1}));
    ++n;
  }
  EXPECT_EQ(n, 2);
}

TEST(DataLoaderPinMemoryNoDevice, BatchesStayUnpinnedWithOneWarning) {
  if (pinned_memory_available()) GTEST_SKIP() << "a CUDA device is visible: batches are pinned here";
  ::testing::internal::CaptureStderr();
  DataLoader first(std::make_shared<Dict>(), DataLoaderOptions{.batch_size = 4, .pin_memory = true});
  DataLoader second(std::make_shared<Dict>(),
                    DataLoaderOptions{.batch_size = 4, .num_workers = 2, .pin_memory = true});
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(first.pins_memory());
  EXPECT_FALSE(second.pins_memory());
  const std::string warning = "pin_memory=true but no CUDA device is visible";
  const size_t at = err.find(warning);
  EXPECT_NE(at, std::string::npos) << "no warning in: " << err;
  EXPECT_EQ(err.find(warning, at + 1), std::string::npos) << "warned more than once: " << err;
  for (auto* loader : {&first, &second}) {
    const std::vector<Flat> got = run_epoch(*loader);
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[2][1].first, (std::vector<float>{8, 8, 8, 9, 9, 9}));
    for (const Flat& f : got) {
      for (const auto& t : f) EXPECT_FALSE(t.second);
    }
  }
}

}  // namespace
}  // namespace ember::data
