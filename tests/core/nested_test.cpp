// core/nested.h: the one walker of nested values holding tensors. for_each_tensor visits every
// tensor of pairs/tuples/arrays/vectors/optionals/string maps and opted-in structs in one order
// (Note [Nested order]); map_tensors rebuilds the value in that same order; values without
// tensors are copied; contains_tensors tells the two apart at compile time.
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/nested.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember {
namespace {

// A struct holding tensors that opts in, as nn's PackedSequence does.
struct Pairish {
  Tensor a;
  int tag = 0;
  Tensor b;
};

}  // namespace

template <>
struct NestedTensors<Pairish> {
  static constexpr bool enabled = true;
  template <class F>
  static void for_each(const Pairish& v, F&& f) {
    f(v.a);
    f(v.b);
  }
  template <class F>
  static Pairish map(const Pairish& v, F&& f) {
    Pairish out;
    out.a = f(v.a);
    out.tag = v.tag;
    out.b = f(v.b);
    return out;
  }
};

namespace {

Tensor scalar(double v) { return full({1}, v); }
double value(const Tensor& t) { return t.defined() ? native::to(t, kFloat64).to_vector<double>()[0] : -1.0; }

using Nested = std::tuple<Tensor, std::vector<Tensor>, std::pair<std::string, std::optional<Tensor>>,
                          std::map<std::string, std::array<Tensor, 2>>, int, Pairish>;

Nested make_nested() {
  Pairish p;
  p.a = scalar(8);
  p.tag = 42;
  p.b = scalar(9);
  return Nested{scalar(0),
                {scalar(1), scalar(2)},
                {"label", scalar(3)},
                {{"b", {scalar(6), scalar(7)}}, {"a", {scalar(4), scalar(5)}}},
                17,
                p};
}

TEST(Nested, ForEachTensorVisitsEveryContainerInOrder) {
  std::vector<double> seen;
  for_each_tensor(make_nested(), [&](const Tensor& t) { seen.push_back(value(t)); });
  // Map entries in key order: "a" (4, 5) before "b" (6, 7).
  EXPECT_EQ(seen, (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(Nested, MapTensorsRebuildsTheSameShapeInTheSameOrder) {
  Nested v = make_nested();
  int calls = 0;
  Nested m = map_tensors(v, [&](const Tensor& t) { return scalar(value(t) * 10 + calls++); });
  std::vector<double> seen;
  for_each_tensor(m, [&](const Tensor& t) { seen.push_back(value(t)); });
  EXPECT_EQ(seen, (std::vector<double>{0, 11, 22, 33, 44, 55, 66, 77, 88, 99}));
  EXPECT_EQ(std::get<2>(m).first, "label");
  EXPECT_EQ(std::get<4>(m), 17);
  EXPECT_EQ(std::get<5>(m).tag, 42);
}

TEST(Nested, EmptyOptionalAndUndefinedTensorsAreHandled) {
  std::tuple<std::optional<Tensor>, Tensor> v{std::nullopt, Tensor()};
  std::vector<bool> defined;
  for_each_tensor(v, [&](const Tensor& t) { defined.push_back(t.defined()); });
  EXPECT_EQ(defined, (std::vector<bool>{false}));  // the empty optional has no tensor; the undefined one is visited
  auto m = map_tensors(v, [](const Tensor& t) { return t; });
  EXPECT_FALSE(std::get<0>(m).has_value());
  EXPECT_EQ(flatten_tensors(std::vector<Tensor>{scalar(1), scalar(2)}).size(), 2u);
}

TEST(Nested, ContainsTensorsTellsDataFromPlainValues) {
  static_assert(nested::contains_tensors<std::vector<Tensor>>());
  static_assert(nested::contains_tensors<std::pair<int, std::optional<Tensor>>>());
  static_assert(nested::contains_tensors<Pairish>());
  static_assert(!nested::contains_tensors<std::vector<int>>());
  static_assert(!nested::contains_tensors<std::map<std::string, std::string>>());
  static_assert(nested::contains_custom<std::vector<Pairish>>());
  static_assert(!nested::contains_custom<std::tuple<Tensor, int>>());
  std::vector<int> plain{1, 2, 3};
  EXPECT_EQ(map_tensors(plain, [](const Tensor& t) { return t; }), plain);
}

}  // namespace
}  // namespace ember
