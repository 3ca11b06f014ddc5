// Tests of the view ops (storage sharing, exact geometry, writes through views) and of
// joining/splitting (cat, stack, split, split_with_sizes, chunk) in core/ops/native.h, checked
// against the plain loops of tests/support/reference.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/error_text.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/tensor.h"
#include "tests/support/reference.h"

namespace ember {
namespace {

using ::testing::HasSubstr;
using ref::Array;
using ref::Layout;

using support::error_of;

Array iota(IntList shape) {
  Array a = Array::filled(std::move(shape), 0);
  for (int64_t i = 0; i < a.numel(); ++i) a.v[i] = static_cast<double>(i);
  return a;
}

// A view: same storage, shares the version counter, marked as a view.
::testing::AssertionResult is_view_of(const Tensor& v, const Tensor& base) {
  if (!v.storage().is_same(base.storage())) return ::testing::AssertionFailure() << "different storage";
  if (v.impl()->version != base.impl()->version) return ::testing::AssertionFailure() << "own version counter";
  if (!v.impl()->is_view) return ::testing::AssertionFailure() << "not marked as a view";
  return ::testing::AssertionSuccess();
}

// ---- geometry of each view op -------------------------------------------------------------------

TEST(View, ViewAndReshapeOfContiguousShareStorage) {
  Tensor a = ref::make(iota({2, 3, 4}), kFloat32);
  Tensor v = native::view(a, {6, -1});
  EXPECT_EQ(v.sizes(), (IntList{6, 4}));
  EXPECT_EQ(v.strides(), (IntList{4, 1}));
  EXPECT_TRUE(is_view_of(v, a));
  EXPECT_TRUE(ref::matches(v, Array({6, 4}, iota({24}).v), kFloat32));
  Tensor r = native::reshape(a, {4, 3, 2});
  EXPECT_TRUE(is_view_of(r, a));
  EXPECT_TRUE(ref::matches(r, Array({4, 3, 2}, iota({24}).v), kFloat32));
  Tensor s = native::view(native::select(a, 0, 1), {3, 2, 2});
  EXPECT_EQ(s.storage_offset(), 12);
  const std::vector<double> all = iota({24}).v;
  EXPECT_TRUE(ref::matches(s, Array({3, 2, 2}, std::vector<double>(all.begin() + 12, all.end())), kFloat32));
}

TEST(View, ViewOfNonContiguousWhenDimsStayTogether) {
  // Transposed [3,4] -> [4,3]; splitting a dim of a non-contiguous tensor is still a view.
  Tensor a = native::t(ref::make(iota({3, 4}), kFloat32));
  Tensor v = native::view(a, {2, 2, 3});
  EXPECT_TRUE(is_view_of(v, a));
  EXPECT_EQ(v.strides(), (IntList{2, 1, 4}));
  Array want = ref::permute(iota({3, 4}), {1, 0});
  EXPECT_TRUE(ref::matches(v, Array({2, 2, 3}, want.v), kFloat32));
}

TEST(View, ViewAcrossNonContiguousDimsThrowsAndReshapeCopies) {
  Tensor a = native::t(ref::make(iota({3, 4}), kFloat32));
  std::string msg = error_of<Error>([&] { native::view(a, {12}); });
  EXPECT_THAT(msg, HasSubstr("view"));
  EXPECT_THAT(msg, HasSubstr("[12]"));
  EXPECT_THAT(msg, HasSubstr("reshape"));
  Tensor r = native::reshape(a, {12});
  EXPECT_FALSE(r.storage().is_same(a.storage()));
  EXPECT_TRUE(r.is_contiguous());
  EXPECT_TRUE(ref::matches(r, Array({12}, ref::permute(iota({3, 4}), {1, 0}).v), kFloat32));
  // Every non-contiguous layout of the reference builder reshapes correctly.
  Array v = ref::random({3, 4, 2}, 11);
  for (Layout l : ref::all_layouts()) {
    SCOPED_TRACE(ref::layout_name(l));
    Tensor x = ref::make(v, kFloat64, l);
    EXPECT_TRUE(ref::matches(native::reshape(x, {2, 12}), Array({2, 12}, v.v), kFloat64, {0, 0}));
    EXPECT_TRUE(ref::matches(native::flatten(x), Array({24}, v.v), kFloat64, {0, 0}));
  }
}

TEST(View, InvalidShapesThrowValueErrorNamingTheShape) {
  Tensor a = zeros({3, 4});
  std::string msg = error_of<ValueError>([&] { native::reshape(a, {5, -1}); });
  EXPECT_THAT(msg, HasSubstr("reshape"));
  EXPECT_THAT(msg, HasSubstr("[5, -1]"));
  EXPECT_THAT(msg, HasSubstr("12"));
  msg = error_of<ValueError>([&] { native::view(a, {4, 4}); });
  EXPECT_THAT(msg, HasSubstr("view"));
  EXPECT_THAT(msg, HasSubstr("[4, 4]"));
  EXPECT_THAT(error_of<ValueError>([&] { native::view(a, {-1, -1}); }), HasSubstr("only one dimension"));
  EXPECT_THAT(error_of<ValueError>([&] { native::view(a, {-2, 6}); }), HasSubstr("-2"));
  // -1 cannot be inferred for a 0-element tensor
  EXPECT_THROW(native::reshape(zeros({0, 3}), {-1, 0}), ValueError);
}

TEST(View, ZeroDimAndZeroElementReshapes) {
  Tensor s = scalar_tensor(5.0);
  Tensor r = native::reshape(s, {1, 1});
  EXPECT_EQ(r.sizes(), (IntList{1, 1}));
  EXPECT_TRUE(is_view_of(r, s));
  EXPECT_DOUBLE_EQ(r.item(), 5.0);
  Tensor back = native::view(r, {});
  EXPECT_EQ(back.dim(), 0);
  EXPECT_DOUBLE_EQ(back.item(), 5.0);
  EXPECT_EQ(native::flatten(s).sizes(), (IntList{1}));
  EXPECT_EQ(native::unsqueeze(s, 0).sizes(), (IntList{1}));
  EXPECT_EQ(native::unsqueeze(s, -1).sizes(), (IntList{1}));
  Tensor e = zeros({0, 3});
  EXPECT_EQ(native::reshape(e, {3, 0}).sizes(), (IntList{3, 0}));
  EXPECT_THROW(native::reshape(e, {0, -1}), ValueError);  // -1 is ambiguous for 0 elements, as in PyTorch
  EXPECT_EQ(native::view(e, {2, 0, 5}).numel(), 0);
}

TEST(View, TransposeAndPermuteSwapSizesAndStrides) {
  Tensor a = ref::make(iota({2, 3, 4}), kInt64);
  Tensor t = native::transpose(a, 0, -1);
  EXPECT_EQ(t.sizes(), (IntList{4, 3, 2}));
  EXPECT_EQ(t.strides(), (IntList{1, 4, 12}));
  EXPECT_TRUE(is_view_of(t, a));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_TRUE(ref::matches(t, ref::permute(iota({2, 3, 4}), {2, 1, 0}), kInt64));
  Tensor p = native::permute(a, {1, -1, 0});
  EXPECT_EQ(p.sizes(), (IntList{3, 4, 2}));
  EXPECT_EQ(p.strides(), (IntList{4, 1, 12}));
  EXPECT_TRUE(ref::matches(p, ref::permute(iota({2, 3, 4}), {1, 2, 0}), kInt64));
  EXPECT_TRUE(is_view_of(p, a));
  Tensor m = native::t(ref::make(iota({2, 5}), kInt64));
  EXPECT_EQ(m.sizes(), (IntList{5, 2}));
  EXPECT_TRUE(ref::matches(m, ref::permute(iota({2, 5}), {1, 0}), kInt64));
  EXPECT_EQ(native::t(zeros({3})).sizes(), (IntList{3}));
}

TEST(View, TransposePermuteBadDimsThrow) {
  Tensor a = zeros({2, 3});
  std::string msg = error_of<IndexError>([&] { native::transpose(a, 0, 2); });
  EXPECT_THAT(msg, HasSubstr("transpose"));
  EXPECT_THAT(msg, HasSubstr("got 2"));
  msg = error_of<ValueError>([&] { native::permute(a, {0, 0}); });
  EXPECT_THAT(msg, HasSubstr("permute"));
  EXPECT_THAT(msg, HasSubstr("repeated dim 0"));
  msg = error_of<ValueError>([&] { native::permute(a, {0}); });
  EXPECT_THAT(msg, HasSubstr("permute"));
  EXPECT_THAT(msg, HasSubstr("[0]"));
  EXPECT_THROW(native::permute(a, {0, 5}), IndexError);
  EXPECT_THAT(error_of<ValueError>([] { native::t(zeros({2, 2, 2})); }), HasSubstr("3D"));
}

TEST(View, NarrowSelectSliceGeometryAndValues) {
  Array v = iota({4, 6});
  Tensor a = ref::make(v, kFloat64);
  Tensor n = native::narrow(a, 1, 2, 3);
  EXPECT_EQ(n.sizes(), (IntList{4, 3}));
  EXPECT_EQ(n.strides(), (IntList{6, 1}));
  EXPECT_EQ(n.storage_offset(), 2);
  EXPECT_TRUE(is_view_of(n, a));
  EXPECT_TRUE(ref::matches(n, ref::narrow(v, 1, 2, 3), kFloat64));
  EXPECT_TRUE(ref::matches(native::narrow(a, 0, -2, 2), ref::narrow(v, 0, 2, 2), kFloat64));
  Tensor s = native::select(a, 1, -1);
  EXPECT_EQ(s.sizes(), (IntList{4}));
  EXPECT_EQ(s.strides(), (IntList{6}));
  EXPECT_EQ(s.storage_offset(), 5);
  EXPECT_TRUE(ref::matches(s, Array({4}, {5, 11, 17, 23}), kFloat64));
  Tensor sl = native::slice(a, 1, 1, 6, 2);
  EXPECT_EQ(sl.sizes(), (IntList{4, 3}));
  EXPECT_EQ(sl.strides(), (IntList{6, 2}));
  EXPECT_EQ(sl.storage_offset(), 1);
  EXPECT_TRUE(is_view_of(sl, a));
  Array want = Array::filled({4, 3}, 0);
  ref::for_each_index(want.shape, [&](const IntList& i) { want.at(i) = v.at({i[0], 1 + 2 * i[1]}); });
  EXPECT_TRUE(ref::matches(sl, want, kFloat64));
  // step larger than the size, negative start and end, end past the size (clamped)
  EXPECT_EQ(native::slice(a, 0, 0, 4, 7).sizes(), (IntList{1, 6}));
  EXPECT_TRUE(ref::matches(native::slice(a, 1, -3, -1), ref::narrow(v, 1, 3, 2), kFloat64));
  EXPECT_TRUE(ref::matches(native::slice(a, 0, 2, 100), ref::narrow(v, 0, 2, 2), kFloat64));
  EXPECT_EQ(native::slice(a, 0, 3, 1).sizes(), (IntList{0, 6}));
  // views of views compose offsets and strides
  Tensor vv = native::select(native::slice(native::t(a), 0, 1, 6, 2), 1, 2);
  EXPECT_TRUE(ref::matches(vv, Array({3}, {13, 15, 17}), kFloat64));
}

TEST(View, NarrowSelectSliceOutOfRangeThrow) {
  Tensor a = zeros({4, 6});
  std::string msg = error_of<IndexError>([&] { native::narrow(a, 1, 4, 3); });
  EXPECT_THAT(msg, HasSubstr("narrow"));
  EXPECT_THAT(msg, HasSubstr("start (4) + length (3)"));
  EXPECT_THAT(msg, HasSubstr("(6)"));
  EXPECT_THROW(native::narrow(a, 0, 0, -1), IndexError);
  EXPECT_THROW(native::narrow(a, 2, 0, 1), IndexError);
  EXPECT_THROW(native::narrow(scalar_tensor(1), 0, 0, 1), IndexError);
  msg = error_of<IndexError>([&] { native::select(a, 0, 4); });
  EXPECT_THAT(msg, HasSubstr("select"));
  EXPECT_THAT(msg, HasSubstr("index 4"));
  EXPECT_THROW(native::select(a, 0, -5), IndexError);
  EXPECT_THAT(error_of<ValueError>([&] { native::slice(a, 0, 0, 4, 0); }), HasSubstr("step"));
  EXPECT_THAT(error_of<IndexError>([&] { native::slice(a, -3, 0, 1); }), HasSubstr("slice"));
}

TEST(View, ExpandUsesZeroStridesAndChecksSizes) {
  Tensor a = ref::make(Array({3, 1}, {1, 2, 3}), kInt32);
  Tensor e = native::expand(a, {2, 3, 4});
  EXPECT_EQ(e.sizes(), (IntList{2, 3, 4}));
  EXPECT_EQ(e.strides(), (IntList{0, 1, 0}));
  EXPECT_TRUE(is_view_of(e, a));
  Array want = Array::filled({2, 3, 4}, 0);
  ref::for_each_index(want.shape, [&](const IntList& i) { want.at(i) = static_cast<double>(i[1] + 1); });
  EXPECT_TRUE(ref::matches(e, want, kInt32));
  EXPECT_EQ(native::expand(a, {-1, 5}).sizes(), (IntList{3, 5}));
  std::string msg = error_of<ValueError>([&] { native::expand(a, {4, 4}); });
  EXPECT_THAT(msg, HasSubstr("expand"));
  EXPECT_THAT(msg, HasSubstr("(4)"));
  EXPECT_THAT(msg, HasSubstr("(3)"));
  EXPECT_THROW(native::expand(a, {3}), ValueError);
  EXPECT_THROW(native::expand(a, {-1, 3, 1}), ValueError);
  EXPECT_EQ(native::expand(scalar_tensor(2), {2, 2}).strides(), (IntList{0, 0}));
}

TEST(View, UnsqueezeSqueezeFlatten) {
  Tensor a = ref::make(iota({2, 3}), kFloat32);
  Tensor u = native::unsqueeze(a, 1);
  EXPECT_EQ(u.sizes(), (IntList{2, 1, 3}));
  EXPECT_EQ(u.strides(), (IntList{3, 3, 1}));
  EXPECT_TRUE(is_view_of(u, a));
  EXPECT_EQ(native::unsqueeze(a, -1).sizes(), (IntList{2, 3, 1}));
  EXPECT_EQ(native::unsqueeze(a, 0).sizes(), (IntList{1, 2, 3}));
  EXPECT_THAT(error_of<IndexError>([&] { native::unsqueeze(a, 3); }), HasSubstr("unsqueeze"));
  Tensor w = native::reshape(a, {1, 2, 1, 3, 1});
  EXPECT_EQ(native::squeeze(w).sizes(), (IntList{2, 3}));
  EXPECT_EQ(native::squeeze(w, 2).sizes(), (IntList{1, 2, 3, 1}));
  EXPECT_EQ(native::squeeze(w, 1).sizes(), (IntList{1, 2, 1, 3, 1}));  // not size 1: unchanged
  EXPECT_EQ(native::squeeze(w, -1).sizes(), (IntList{1, 2, 1, 3}));
  EXPECT_TRUE(is_view_of(native::squeeze(w), a));
  EXPECT_TRUE(ref::matches(native::squeeze(w), iota({2, 3}), kFloat32));
  Tensor b = ref::make(iota({2, 3, 4, 5}), kFloat32);
  Tensor f = native::flatten(b, 1, 2);
  EXPECT_EQ(f.sizes(), (IntList{2, 12, 5}));
  EXPECT_TRUE(is_view_of(f, b));
  EXPECT_EQ(native::flatten(b).sizes(), (IntList{120}));
  EXPECT_EQ(native::flatten(b, -2).sizes(), (IntList{2, 3, 20}));
  EXPECT_THAT(error_of<ValueError>([&] { native::flatten(b, 2, 1); }), HasSubstr("flatten"));
}

TEST(View, ZeroDimTransposeAndSqueezeStillCheckTheirDims) {
  // A 0-dim tensor accepts dim 0 / -1 only, as in PyTorch.
  Tensor s = scalar_tensor(2.0);
  EXPECT_EQ(native::transpose(s, 0, -1).dim(), 0);
  EXPECT_EQ(native::squeeze(s, 0).dim(), 0);
  EXPECT_THAT(error_of<IndexError>([&] { native::transpose(s, 0, 5); }), HasSubstr("transpose"));
  EXPECT_THAT(error_of<IndexError>([&] { native::squeeze(s, 3); }), HasSubstr("squeeze"));
}

TEST(View, ReshapeOfAnExpandedTensorCopiesAndViewsWhereItCan) {
  Tensor base = ref::make(Array({3, 1}, {1, 2, 3}), kFloat32);
  Tensor e = native::expand(base, {3, 4});
  Tensor r = native::reshape(e, {12});
  EXPECT_FALSE(r.storage().is_same(base.storage()));
  EXPECT_TRUE(ref::matches(r, Array({12}, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}), kFloat32));
  Tensor u = native::reshape(e, {3, 1, 4});  // only adds a unit dim: still a view
  EXPECT_TRUE(is_view_of(u, base));
  EXPECT_EQ(u.strides()[2], 0);
  EXPECT_THROW(native::view(e, {12}), Error);
}

TEST(View, AsStridedChecksStorageBounds) {
  Tensor a = ref::make(iota({10}), kFloat32);
  Tensor s = native::as_strided(a, {3, 2}, {3, 1}, 1);
  EXPECT_TRUE(is_view_of(s, a));
  EXPECT_TRUE(ref::matches(s, Array({3, 2}, {1, 2, 4, 5, 7, 8}), kFloat32));
  std::string msg = error_of<IndexError>([&] { native::as_strided(a, {4, 4}, {4, 1}, 0); });
  EXPECT_THAT(msg, HasSubstr("as_strided"));
  EXPECT_THAT(msg, HasSubstr("[4, 4]"));
}

TEST(View, WritesThroughEveryViewAreVisibleInTheBase) {
  using ViewFn = std::function<Tensor(const Tensor&)>;
  struct Case {
    const char* name;
    ViewFn fn;
  };
  const std::vector<Case> cases = {
      {"view", [](const Tensor& x) { return native::view(x, {4, 6}); }},
      {"reshape", [](const Tensor& x) { return native::reshape(x, {-1}); }},
      {"transpose", [](const Tensor& x) { return native::transpose(x, 0, 2); }},
      {"permute", [](const Tensor& x) { return native::permute(x, {2, 0, 1}); }},
      {"narrow", [](const Tensor& x) { return native::narrow(x, 2, 1, 2); }},
      {"select", [](const Tensor& x) { return native::select(x, 1, 2); }},
      {"slice", [](const Tensor& x) { return native::slice(x, 2, 0, 4, 3); }},
      {"unsqueeze", [](const Tensor& x) { return native::unsqueeze(x, 1); }},
      {"squeeze", [](const Tensor& x) { return native::squeeze(native::unsqueeze(x, 0)); }},
      {"flatten", [](const Tensor& x) { return native::flatten(x, 0, 1); }},
      {"as_strided", [](const Tensor& x) { return native::as_strided(x, {2, 2}, {12, 5}, 1); }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor base = ref::make(iota({2, 3, 4}), kFloat32);
    Tensor v = c.fn(base);
    ASSERT_TRUE(v.storage().is_same(base.storage()));
    // The positions of the view in the base, from the view's own geometry.
    Array before = ref::read(base);
    Array expected = before;
    ref::for_each_index(v.sizes(), [&](const IntList& i) {
      int64_t e = ref::elem_of(v, i);
      expected.v[static_cast<size_t>(e)] = 100 + before.v[static_cast<size_t>(e)];
    });
    native::add_(v, 100.0);
    EXPECT_TRUE(ref::matches(base, expected, kFloat32)) << "view sizes " << ref::shape_str(v.sizes());
    EXPECT_EQ(base.version(), 1u);
    // ... and base writes show in the view
    native::fill_(base, -1.0);
    EXPECT_TRUE(ref::matches(v, Array::filled(v.sizes(), -1.0), kFloat32));
  }
}

TEST(View, ExpandedViewSeesBaseWrites) {
  Tensor base = zeros({3, 1});
  Tensor e = native::expand(base, {3, 4});
  Tensor row = native::select(base, 0, 1);
  native::fill_(row, 5.0);
  Array want = Array::filled({3, 4}, 0);
  for (int64_t j = 0; j < 4; ++j) want.at({1, j}) = 5;
  EXPECT_TRUE(ref::matches(e, want, kFloat32));
}

TEST(Broadcast, ShapesFollowNumPyRules) {
  EXPECT_EQ(native::broadcast_shapes({3, 1, 4}, {2, 1}), (IntList{3, 2, 4}));
  EXPECT_EQ(native::broadcast_shapes({}, {2, 3}), (IntList{2, 3}));
  EXPECT_EQ(native::broadcast_shapes({0, 1}, {1, 5}), (IntList{0, 5}));
  EXPECT_EQ(native::broadcast_shapes({5}, {1}), (IntList{5}));
  std::string msg = error_of<ValueError>([] { native::broadcast_shapes({2, 3}, {4}, "myop"); });
  EXPECT_THAT(msg, HasSubstr("myop"));
  EXPECT_THAT(msg, HasSubstr("(3)"));
  EXPECT_THAT(msg, HasSubstr("(4)"));
}

// ---- cat / stack ---------------------------------------------------------------------------------

TEST(Cat, AlongEveryDimWithNonContiguousInputs) {
  Array a = ref::as_dtype(ref::random({2, 3, 4}, 21), kFloat32), b = ref::as_dtype(ref::random({2, 3, 4}, 22), kFloat32);
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    for (Layout la : ref::all_layouts()) {
      SCOPED_TRACE(std::string("dim ") + std::to_string(dim) + " " + ref::layout_name(la));
      int64_t d = dim < 0 ? dim + 3 : dim;
      Array bb = ref::narrow(b, d, 0, 2);  // a different size along the cat dim
      Tensor ta = ref::make(a, kFloat32, la), tb = ref::make(bb, kFloat32, Layout::kTransposed);
      Tensor out = native::cat({ta, tb, ta}, dim);
      EXPECT_TRUE(out.is_contiguous());
      EXPECT_TRUE(ref::matches(out, ref::cat({a, bb, a}, d), kFloat32, {0, 0}));
    }
  }
}

TEST(Cat, PromotesDtypesAndSkipsLegacyEmptyTensors) {
  Tensor i = from_vector<int64_t>({1, 2}), f = from_vector<float>({0.5f}, {1});
  Tensor out = native::cat({i, f});
  EXPECT_TRUE(ref::matches(out, Array({3}, {1, 2, 0.5}), kFloat32));
  Tensor d = native::cat({from_vector<int32_t>({1}, {1}), from_vector<double>({2.25}, {1})});
  EXPECT_TRUE(ref::matches(d, Array({2}, {1, 2.25}), kFloat64));
  Tensor bl = native::cat({from_vector<bool>({true}, {1}), from_vector<int32_t>({7}, {1})});
  EXPECT_TRUE(ref::matches(bl, Array({2}, {1, 7}), kInt32));
  // 1-D empty tensors are skipped, as in PyTorch; other 0-element tensors take part.
  Tensor m = ref::make(iota({2, 3}), kFloat32);
  Tensor skip = native::cat({zeros({0}), m, zeros({0})}, 1);
  EXPECT_TRUE(ref::matches(skip, iota({2, 3}), kFloat32));
  Tensor z = native::cat({m, zeros({2, 0})}, 1);
  EXPECT_TRUE(ref::matches(z, iota({2, 3}), kFloat32));
  Tensor all_empty = native::cat({zeros({0}), zeros({0})});
  EXPECT_EQ(all_empty.numel(), 0);
}

TEST(Cat, BadInputsThrowNamingTheProblem) {
  Tensor a = zeros({2, 3}), b = zeros({2, 4});
  std::string msg = error_of<ValueError>([&] { native::cat({a, b}, 0); });
  EXPECT_THAT(msg, HasSubstr("cat"));
  EXPECT_THAT(msg, HasSubstr("Expected size 3 but got size 4"));
  EXPECT_THAT(msg, HasSubstr("tensor number 1"));
  EXPECT_NO_THROW(native::cat({a, b}, 1));
  EXPECT_THAT(error_of<ValueError>([] { native::cat({}, 0); }), HasSubstr("non-empty"));
  EXPECT_THAT(error_of<ValueError>([] { native::cat({scalar_tensor(1), scalar_tensor(2)}); }),
              HasSubstr("zero-dimensional"));
  msg = error_of<ValueError>([&] { native::cat({a, zeros({2, 3, 1})}); });
  EXPECT_THAT(msg, HasSubstr("same number of dimensions"));
  msg = error_of<IndexError>([&] { native::cat({a, a}, 2); });
  EXPECT_THAT(msg, HasSubstr("cat"));
  msg = error_of<Error>([&] { native::cat({a, zeros({2, 3}, TensorOptions().device("cpu:1"))}); });
  EXPECT_THAT(msg, HasSubstr("cat"));
  EXPECT_THAT(msg, HasSubstr("cpu:0"));
  EXPECT_THAT(msg, HasSubstr("cpu:1"));
}

TEST(Stack, InsertsANewDimAnywhere) {
  Array a = ref::random({2, 3}, 31), b = ref::random({2, 3}, 32);
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(dim);
    int64_t d = dim < 0 ? dim + 3 : dim;
    Tensor out = native::stack({ref::make(a, kFloat64, Layout::kStrided), ref::make(b, kFloat64)}, dim);
    IntList s = {2, 3};
    s.insert(s.begin() + d, 1);
    Array want = ref::cat({Array(s, a.v), Array(s, b.v)}, d);
    EXPECT_TRUE(ref::matches(out, want, kFloat64, {0, 0}));
  }
  Tensor sc = native::stack({scalar_tensor(1), scalar_tensor(2), scalar_tensor(3)});
  EXPECT_TRUE(ref::matches(sc, Array({3}, {1, 2, 3}), kFloat32));
  std::string msg = error_of<ValueError>([] { native::stack({zeros({2}), zeros({3})}); });
  EXPECT_THAT(msg, HasSubstr("stack"));
  EXPECT_THAT(msg, HasSubstr("[3]"));
  EXPECT_THAT(msg, HasSubstr("entry 1"));
  EXPECT_THROW(native::stack({}), ValueError);
  EXPECT_THROW(native::stack({zeros({2})}, 3), IndexError);
}

// ---- split / chunk -----------------------------------------------------------------------------------

IntList dim_sizes(const std::vector<Tensor>& parts, int64_t dim) {
  IntList s;
  for (const auto& p : parts) s.push_back(p.size(dim));
  return s;
}

TEST(Split, UnevenSplitsAreViewsThatCoverTheInput) {
  Array v = ref::as_dtype(ref::random({5, 4}, 41), kFloat32);
  Tensor a = ref::make(v, kFloat32, Layout::kTransposed);
  auto parts = native::split(a, 2, 0);
  EXPECT_EQ(dim_sizes(parts, 0), (IntList{2, 2, 1}));
  int64_t off = 0;
  for (const auto& p : parts) {
    EXPECT_TRUE(is_view_of(p, a));
    EXPECT_TRUE(ref::matches(p, ref::narrow(v, 0, off, p.size(0)), kFloat32, {0, 0}));
    off += p.size(0);
  }
  auto cols = native::split(a, 3, -1);
  EXPECT_EQ(dim_sizes(cols, 1), (IntList{3, 1}));
  EXPECT_TRUE(ref::matches(cols[1], ref::narrow(v, 1, 3, 1), kFloat32, {0, 0}));
  EXPECT_EQ(native::split(a, 10, 0).size(), 1u);
  EXPECT_EQ(native::split(zeros({0, 2}), 3, 0).size(), 1u);
  EXPECT_THAT(error_of<ValueError>([&] { native::split(a, 0, 0); }), HasSubstr("split_size"));
  EXPECT_THROW(native::split(scalar_tensor(1), 1), IndexError);
}

TEST(Split, WithSizesIncludingZeroAndBadSums) {
  Array v = iota({2, 6});
  Tensor a = ref::make(v, kInt64);
  auto parts = native::split_with_sizes(a, {1, 0, 5}, 1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_TRUE(ref::matches(parts[0], ref::narrow(v, 1, 0, 1), kInt64));
  EXPECT_EQ(parts[1].sizes(), (IntList{2, 0}));
  EXPECT_TRUE(ref::matches(parts[2], ref::narrow(v, 1, 1, 5), kInt64));
  // writes into a piece land in the input
  native::fill_(parts[2], 0.0);
  EXPECT_EQ(a.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0}));
  std::string msg = error_of<ValueError>([&] { native::split_with_sizes(a, {2, 3}, 1); });
  EXPECT_THAT(msg, HasSubstr("split_with_sizes"));
  EXPECT_THAT(msg, HasSubstr("[2, 3]"));
  EXPECT_THAT(msg, HasSubstr("6"));
  EXPECT_THROW(native::split_with_sizes(a, {7, -1}, 1), ValueError);
}

TEST(Chunk, UnevenChunksAsPyTorch) {
  Tensor a = ref::make(iota({5, 2}), kFloat32);
  EXPECT_EQ(dim_sizes(native::chunk(a, 3), 0), (IntList{2, 2, 1}));
  EXPECT_EQ(dim_sizes(native::chunk(a, 2), 0), (IntList{3, 2}));
  EXPECT_EQ(dim_sizes(native::chunk(a, 5), 0), (IntList{1, 1, 1, 1, 1}));
  EXPECT_EQ(dim_sizes(native::chunk(a, 8), 0), (IntList{1, 1, 1, 1, 1}));  // fewer chunks than asked
  Tensor six = zeros({6});
  EXPECT_EQ(dim_sizes(native::chunk(six, 4), 0), (IntList{2, 2, 2}));  // ceil(6/4) = 2 per chunk
  auto c = native::chunk(a, 2, -1);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_TRUE(ref::matches(c[1], ref::narrow(iota({5, 2}), 1, 1, 1), kFloat32));
  EXPECT_TRUE(is_view_of(c[0], a));
  EXPECT_THAT(error_of<ValueError>([&] { native::chunk(a, 0); }), HasSubstr("chunk"));
  EXPECT_THROW(native::chunk(scalar_tensor(1), 2), IndexError);
}

TEST(Chunk, ZeroSizeDimGivesTheRequestedNumberOfEmptyChunks) {
  // PyTorch: torch.empty(0, 2).chunk(3) returns 3 empty chunks.
  auto c = native::chunk(zeros({0, 2}), 3);
  ASSERT_EQ(c.size(), 3u);
  for (const auto& p : c) EXPECT_EQ(p.sizes(), (IntList{0, 2}));
}

}  // namespace
}  // namespace ember
