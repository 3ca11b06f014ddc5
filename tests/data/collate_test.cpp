#include <gtest/gtest.h>

#include "core/ops/factory.h"
#include "data/batch_codec.h"
#include "data/collate.h"
#include "data/pad_collate.h"
#include "tests/support/error_text.h"

namespace ember::data {
namespace {

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

TEST(DefaultCollate, StacksTensors) {
  Tensor b = DefaultCollate{}(std::vector<Tensor>{from_vector<float>({1, 2}), from_vector<float>({3, 4})});
  EXPECT_EQ(b.sizes(), (IntList{2, 2}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
}

TEST(DefaultCollate, NumbersBecomeTensorsOfTheirKind) {
  Tensor i = DefaultCollate{}(std::vector<int>{1, 2, 3});
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(ints(i), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(DefaultCollate{}(std::vector<double>{0.5}).dtype(), kFloat64);
  EXPECT_EQ(DefaultCollate{}(std::vector<float>{0.5f}).dtype(), kFloat32);
  Tensor b = DefaultCollate{}(std::vector<bool>{true, false});
  EXPECT_EQ(b.dtype(), kBool);
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, false}));
}

TEST(DefaultCollate, PairsTuplesMapsAndVectorsCollateElementwise) {
  using S = std::pair<Tensor, int64_t>;
  auto [x, y] = DefaultCollate{}(std::vector<S>{{from_vector<float>({1}, {1}), 7}, {from_vector<float>({2}, {1}), 8}});
  EXPECT_EQ(x.sizes(), (IntList{2, 1}));
  EXPECT_EQ(ints(y), (std::vector<int64_t>{7, 8}));

  using T = std::tuple<int64_t, std::string, double>;
  auto t = DefaultCollate{}(std::vector<T>{{1, "a", 0.5}, {2, "b", 1.5}});
  EXPECT_EQ(ints(std::get<0>(t)), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(std::get<1>(t), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(std::get<2>(t).to_vector<double>(), (std::vector<double>{0.5, 1.5}));

  using M = std::map<std::string, Tensor>;
  auto m = DefaultCollate{}(std::vector<M>{{{"a", from_vector<int64_t>({1}, {1})}, {"b", from_vector<int64_t>({2}, {1})}},
                                           {{"a", from_vector<int64_t>({3}, {1})}, {"b", from_vector<int64_t>({4}, {1})}}});
  EXPECT_EQ(ints(m["a"]), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(ints(m["b"]), (std::vector<int64_t>{2, 4}));

  // TensorDataset rows: a batch of rows is a row of batches.
  auto v = DefaultCollate{}(std::vector<std::vector<Tensor>>{{from_vector<float>({1}, {1}), from_vector<int64_t>({5}, {1})},
                                                              {from_vector<float>({2}, {1}), from_vector<int64_t>({6}, {1})}});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[1].sizes(), (IntList{2, 1}));
  EXPECT_EQ(ints(v[1]), (std::vector<int64_t>{5, 6}));
}

TEST(DefaultCollate, UnequalListsAreValueError) {
  EXPECT_THROW(DefaultCollate{}(std::vector<std::vector<int>>{{1, 2}, {3}}), ValueError);
  using M = std::map<std::string, int>;
  EXPECT_THROW(DefaultCollate{}(std::vector<M>{{{"a", 1}}, {{"b", 2}}}), ValueError);
}

TEST(PadCollate, BatchFirstPadsToLongest) {
  PadCollate pad(-1, /*batch_first=*/true);
  auto [p, len] = pad({from_vector<int64_t>({1, 2, 3}), from_vector<int64_t>({4}, {1}), from_vector<int64_t>({5, 6})});
  EXPECT_EQ(p.sizes(), (IntList{3, 3}));
  EXPECT_EQ(ints(p), (std::vector<int64_t>{1, 2, 3, 4, -1, -1, 5, 6, -1}));
  EXPECT_EQ(len.dtype(), kInt64);
  EXPECT_EQ(ints(len), (std::vector<int64_t>{3, 1, 2}));
}

TEST(PadCollate, TimeMajorByDefault) {
  auto [p, len] = PadCollate()({from_vector<int64_t>({1, 2}), from_vector<int64_t>({3}, {1})});
  EXPECT_EQ(p.sizes(), (IntList{2, 2}));
  EXPECT_EQ(ints(p), (std::vector<int64_t>{1, 3, 2, 0}));
  EXPECT_EQ(ints(len), (std::vector<int64_t>{2, 1}));
  EXPECT_THROW(PadCollate()({from_vector<int64_t>({1, 2}, {1, 2})}), ValueError);
  EXPECT_THROW(PadCollate()({from_vector<int64_t>({1}, {1}), from_vector<float>({1}, {1})}), ValueError);
}

// Issue 19, item 1: batch sizes are checked products, never a wrapped-around allocation.
TEST(PadCollate, OverflowingBatchIsValueErrorNamingPadCollate) {
  Tensor huge = native::expand(zeros({1}, TensorOptions(kInt64)), {int64_t{1} << 59});  // a legal view
  const std::string err = support::error_of<ValueError>([&] {
    PadCollate()({huge, huge, huge, huge, huge, huge, huge, huge});
  });
  EXPECT_NE(err.find("PadCollate: shape"), std::string::npos) << err;
}

TEST(DefaultCollate, OverflowingStackIsValueError) {
  Tensor huge = native::expand(zeros({1}), {int64_t{1} << 59});
  EXPECT_THROW(DefaultCollate()(std::vector<Tensor>(16, huge)), ValueError);
}

TEST(BatchCodec, NestedBatchRoundTrips) {
  using B = std::tuple<Tensor, std::vector<std::string>, std::map<std::string, std::pair<Tensor, double>>,
                       std::optional<int>, Tensor>;
  B b{from_vector<float>({1, 2}), {"x", "yy"}, {{"k", {from_vector<int64_t>({9}, {1}), 2.5}}}, 4, Tensor()};
  BatchEncoder e = encode_batch(b);
  EXPECT_EQ(e.tensors().size(), 2u);  // the undefined tensor travels as a flag
  B r = decode_batch<B>(e.tensors(), e.meta());
  EXPECT_TRUE(std::get<0>(r).is_same(std::get<0>(b)));
  EXPECT_EQ(std::get<1>(r), (std::vector<std::string>{"x", "yy"}));
  EXPECT_EQ(ints(std::get<2>(r)["k"].first), (std::vector<int64_t>{9}));
  EXPECT_EQ(std::get<2>(r)["k"].second, 2.5);
  EXPECT_EQ(std::get<3>(r), 4);
  EXPECT_FALSE(std::get<4>(r).defined());
}

// A struct that opts into core/nested.h (as PackedSequence does) travels as its tensors.
struct Packedish {
  Tensor data;
  Tensor sizes;
};

}  // namespace
}  // namespace ember::data

template <>
struct ember::NestedTensors<ember::data::Packedish> {
  static constexpr bool enabled = true;
  template <class F>
  static void for_each(const ember::data::Packedish& v, F&& f) {
    f(v.data);
    f(v.sizes);
  }
  template <class F>
  static ember::data::Packedish map(const ember::data::Packedish& v, F&& f) {
    ember::data::Packedish out;
    out.data = f(v.data);
    out.sizes = f(v.sizes);
    return out;
  }
};

namespace ember::data {
namespace {

TEST(BatchCodec, NestedTensorsTypeRoundTripsAsItsTensors) {
  using B = std::pair<Packedish, std::vector<Packedish>>;
  B b{{from_vector<float>({1, 2, 3}), from_vector<int64_t>({2, 1})}, {{from_vector<float>({4}), Tensor()}}};
  BatchEncoder e = encode_batch(b);
  EXPECT_EQ(e.tensors().size(), 3u);
  B r = decode_batch<B>(e.tensors(), e.meta());
  EXPECT_TRUE(r.first.data.is_same(b.first.data));
  EXPECT_EQ(ints(r.first.sizes), (std::vector<int64_t>{2, 1}));
  ASSERT_EQ(r.second.size(), 1u);
  EXPECT_TRUE(r.second[0].data.is_same(b.second[0].data));
  EXPECT_FALSE(r.second[0].sizes.defined());
}

}  // namespace
}  // namespace ember::data
