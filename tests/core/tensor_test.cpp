// Tests of Tensor itself (core/tensor.h) and the factories (core/ops/factory.h): metadata,
// item/to_vector, dtype and device conversion, clone/contiguous/copy_, version counters and
// printing. Values are checked against tests/support/reference.h, which reads tensors through
// their strides without any ember op.
#include "tests/support/error_text.h"
#include "core/tensor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "tests/support/reference.h"

namespace ember {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ref::Array;
using ref::Layout;

const std::vector<DType> kDtypes = {kFloat32, kFloat64, kInt64, kInt32, kBool};

using support::error_of;

// ---- factories ------------------------------------------------------------------------------

TEST(Factory, ZerosOnesFullHaveValuesDtypeAndShapeForEveryDtype) {
  for (DType dt : kDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor z = zeros({2, 3}, dt), o = ones({2, 3}, dt), f = full({3, 1}, 7.0, dt);
    EXPECT_TRUE(ref::matches(z, Array::filled({2, 3}, 0.0), dt));
    EXPECT_TRUE(ref::matches(o, Array::filled({2, 3}, 1.0), dt));
    EXPECT_TRUE(ref::matches(f, Array::filled({3, 1}, dt == kBool ? 1.0 : 7.0), dt));
    EXPECT_TRUE(z.is_contiguous());
    EXPECT_EQ(z.strides(), (IntList{3, 1}));
    EXPECT_EQ(z.device(), Device::cpu());
    EXPECT_EQ(z.element_size(), element_size(dt));
    EXPECT_EQ(z.nbytes(), 6 * element_size(dt));
  }
}

TEST(Factory, ZeroElementAndZeroDimShapes) {
  Tensor e = zeros({0, 3});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.sizes(), (IntList{0, 3}));
  EXPECT_EQ(e.to_vector<float>().size(), 0u);
  Tensor s = full({}, 2.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_DOUBLE_EQ(s.item(), 2.5);
  Tensor st = scalar_tensor(-4, kInt64);
  EXPECT_EQ(st.dim(), 0);
  EXPECT_EQ(st.dtype(), kInt64);
  EXPECT_EQ(st.item<int64_t>(), -4);
}

TEST(Factory, NegativeSizeThrowsValueErrorNamingTheSize) {
  std::string msg = error_of<ValueError>([] { empty({2, -1}); });
  EXPECT_THAT(msg, AllOf(HasSubstr("empty"), HasSubstr("-1")));
  EXPECT_THROW(zeros({-3}), ValueError);
  EXPECT_THROW(full({-3}, 1.0), ValueError);
}

TEST(Factory, ArangeIntegerFloatAndNegativeStep) {
  EXPECT_EQ(arange(5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(5).dtype(), kInt64);
  Tensor f = arange(0, 1, 0.25, kFloat32);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(arange(5, 0, -2).to_vector<int64_t>(), (std::vector<int64_t>{5, 3, 1}));
  EXPECT_EQ(arange(0, 0.3, 0.1, kFloat64).numel(), 3);  // 0.3 / 0.1 rounds to just below 3
  EXPECT_EQ(arange(0).numel(), 0);
}

TEST(Factory, ArangeBadStepThrowsValueError) {
  EXPECT_THAT(error_of<ValueError>([] { arange(0, 5, 0); }), HasSubstr("arange"));
  std::string msg = error_of<ValueError>([] { arange(5, 0, 1); });
  EXPECT_THAT(msg, AllOf(HasSubstr("arange"), HasSubstr("step=1")));
}

TEST(Factory, EyeIsIdentity) {
  for (DType dt : kDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    Array want = Array::filled({3, 3}, 0.0);
    for (int64_t i = 0; i < 3; ++i) want.at({i, i}) = 1;
    EXPECT_TRUE(ref::matches(eye(3, dt), want, dt));
  }
  EXPECT_EQ(eye(0).numel(), 0);
}

TEST(Factory, FromVectorAndTensorList) {
  Tensor a = from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(ref::matches(a, Array({2, 3}, {1, 2, 3, 4, 5, 6}), kInt32));
  Tensor b = from_vector<bool>({true, false, true});
  EXPECT_TRUE(ref::matches(b, Array({3}, {1, 0, 1}), kBool));
  Tensor c = tensor({1, 2, 3, 4}, {2, 2}, kFloat64);
  EXPECT_TRUE(ref::matches(c, Array({2, 2}, {1, 2, 3, 4}), kFloat64));
  EXPECT_TRUE(ref::matches(tensor({1.5, -2}), Array({2}, {1.5, -2}), kFloat32));
  EXPECT_EQ(from_vector<float>({}).sizes(), (IntList{0}));
}

TEST(Factory, FromVectorShapeMismatchThrowsValueError) {
  std::string msg = error_of<ValueError>([] { from_vector<float>({1, 2, 3}, {2, 2}); });
  EXPECT_THAT(msg, AllOf(HasSubstr("from_vector"), HasSubstr("[2, 2]"), HasSubstr("got 3")));
}

TEST(Factory, FromBlobSharesMemoryAndRunsDeleterOnce) {
  std::vector<float> buf = {1, 2, 3, 4, 5, 6};
  int deleted = 0;
  {
    Tensor t = from_blob(buf.data(), {2, 3}, kFloat32, [&](void* p) {
      EXPECT_EQ(p, buf.data());
      ++deleted;
    });
    EXPECT_EQ(t.raw_data(), buf.data());
    EXPECT_TRUE(ref::matches(t, Array({2, 3}, {1, 2, 3, 4, 5, 6}), kFloat32));
    buf[4] = 50;
    EXPECT_DOUBLE_EQ(native::select(native::select(t, 0, 1), 0, 1).item(), 50.0);
    Tensor view = native::transpose(t, 0, 1);
    native::fill_(view, 0.0);
    EXPECT_EQ(buf[0], 0.0f);
    Tensor keep = view;
    t = Tensor();
    EXPECT_EQ(deleted, 0);  // the view still holds the storage
  }
  EXPECT_EQ(deleted, 1);
}

TEST(Factory, LikeFactoriesKeepDtypeShapeAndDevice) {
  Tensor src = zeros({2, 2}, TensorOptions(kInt32).device("cpu:1"));
  for (const Tensor& t : {empty_like(src), zeros_like(src), ones_like(src), full_like(src, 3)}) {
    EXPECT_EQ(t.dtype(), kInt32);
    EXPECT_EQ(t.sizes(), (IntList{2, 2}));
    EXPECT_EQ(t.device(), Device::cpu(1));
    EXPECT_FALSE(t.storage().is_same(src.storage()));
  }
  EXPECT_TRUE(ref::matches(full_like(src, 3), Array::filled({2, 2}, 3), kInt32));
  EXPECT_TRUE(ref::matches(ones_like(src), Array::filled({2, 2}, 1), kInt32));
}

// ---- metadata -------------------------------------------------------------------------------

TEST(Tensor, SizeAndStrideAcceptNegativeDims) {
  Tensor t = zeros({2, 3, 4});
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.size(-3), 2);
  EXPECT_EQ(t.stride(0), 12);
  EXPECT_EQ(t.stride(-2), 4);
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.storage_offset(), 0);
}

TEST(Tensor, SizeOutOfRangeThrowsIndexErrorNamingTheDim) {
  Tensor t = zeros({2, 3});
  std::string msg = error_of<IndexError>([&] { t.size(2); });
  EXPECT_THAT(msg, AllOf(HasSubstr("size"), HasSubstr("[-2, 1]"), HasSubstr("got 2")));
  EXPECT_THROW(t.size(-3), IndexError);
  EXPECT_THROW(t.stride(5), IndexError);
  EXPECT_THAT(error_of<IndexError>([] { scalar_tensor(1).size(0); }), HasSubstr("0-dim"));
}

TEST(Tensor, DataPtrOfWrongTypeThrowsTypeError) {
  Tensor t = zeros({2}, kInt64);
  EXPECT_NE(t.data_ptr<int64_t>(), nullptr);
  std::string msg = error_of<TypeError>([&] { t.data_ptr<float>(); });
  EXPECT_THAT(msg, AllOf(HasSubstr("int64"), HasSubstr("float32")));
}

TEST(Tensor, UndefinedTensorThrowsError) {
  Tensor u;
  EXPECT_FALSE(u.defined());
  EXPECT_THAT(error_of<Error>([&] { u.sizes(); }), HasSubstr("undefined"));
  EXPECT_EQ(u.str(), "Tensor(undefined)");
}

TEST(Tensor, RequiresGradOnIntegerTensorThrowsTypeError) {
  Tensor t = zeros({2}, kInt64);
  EXPECT_THAT(error_of<TypeError>([&] { t.requires_grad_(); }), HasSubstr("int64"));
  EXPECT_FALSE(t.requires_grad());
  Tensor f = zeros({2});
  f.requires_grad_();
  EXPECT_TRUE(f.requires_grad());
}

// ---- item and to_vector --------------------------------------------------------------------------

TEST(Tensor, ItemOfScalarAndOfOneElementTensors) {
  EXPECT_DOUBLE_EQ(scalar_tensor(-1.25).item(), -1.25);
  EXPECT_DOUBLE_EQ(full({1, 1, 1}, 3.0, kFloat64).item(), 3.0);
  EXPECT_EQ(scalar_tensor(7, kInt32).item<int32_t>(), 7);
  EXPECT_EQ(scalar_tensor(1, kBool).item<bool>(), true);
  Tensor big = from_vector<int64_t>({int64_t{1} << 40});
  EXPECT_EQ(big.item<int64_t>(), int64_t{1} << 40);
  // A one-element view with an offset reads the right element.
  Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2});
  EXPECT_DOUBLE_EQ(native::select(native::select(a, 0, 1), 0, 0).item(), 3.0);
}

TEST(Tensor, ItemOfManyElementsThrowsValueErrorWithCount) {
  std::string msg = error_of<ValueError>([] { zeros({2, 3}).item(); });
  EXPECT_THAT(msg, AllOf(HasSubstr("item"), HasSubstr("6 elements")));
  EXPECT_THROW(zeros({0}).item(), ValueError);
}

TEST(Tensor, ToVectorOfNonContiguousTensorIsRowMajor) {
  for (Layout l : ref::all_layouts()) {
    SCOPED_TRACE(ref::layout_name(l));
    Array v = ref::random({3, 4, 2}, 1, -5, 5, true);
    Tensor t = ref::make(v, kInt64, l);
    std::vector<int64_t> got = t.to_vector<int64_t>();
    ASSERT_EQ(got.size(), v.v.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(static_cast<double>(got[i]), v.v[i]) << i;
    std::vector<double> asd = t.to_vector<double>();
    EXPECT_EQ(asd, v.v);
  }
}

TEST(Tensor, ToVectorConvertsDtype) {
  Tensor t = from_vector<float>({1.75f, -2.5f, 0.0f});
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{1, -2, 0}));
  EXPECT_EQ(t.to_vector<bool>(), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(from_vector<bool>({true, false}).to_vector<float>(), (std::vector<float>{1, 0}));
}

// ---- to(dtype) -------------------------------------------------------------------------------

TEST(Conversion, EveryDtypePairConvertsSmallIntegersExactly) {
  Array v({2, 3}, {0, 1, 2, 3, 4, 5});
  Array as_bool({2, 3}, {0, 1, 1, 1, 1, 1});
  for (DType from : kDtypes) {
    for (DType to : kDtypes) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to));
      Array src = from == kBool ? as_bool : v;
      for (Layout l : {Layout::kContiguous, Layout::kTransposed}) {
        Tensor a = ref::make(src, from, l);
        Tensor b = native::to(a, to);
        EXPECT_TRUE(ref::matches(b, to == kBool ? as_bool : src, to));
        EXPECT_EQ(b.sizes(), a.sizes());
      }
    }
  }
}

TEST(Conversion, RoundTripsFloat32Float64AndInt32Int64) {
  Array f = ref::random({17}, 2);
  Tensor a = ref::make(f, kFloat32);
  Tensor back = native::to(native::to(a, kFloat64), kFloat32);
  EXPECT_EQ(back.to_vector<float>(), a.to_vector<float>());  // f32 -> f64 -> f32 is exact
  Tensor i = from_vector<int64_t>({2147483647, -2147483648LL, 5});
  Tensor i2 = native::to(native::to(i, kInt32), kInt64);
  EXPECT_EQ(i2.to_vector<int64_t>(), i.to_vector<int64_t>());
  Tensor d = from_vector<double>({0.1});
  EXPECT_EQ(native::to(d, kFloat32).item(), static_cast<double>(0.1f));
}

TEST(Conversion, FloatToIntegerTruncatesTowardZeroAndToBoolIsNonzero) {
  Tensor a = from_vector<float>({-2.7f, -0.5f, 0.0f, 0.5f, 2.7f});
  EXPECT_EQ(native::to(a, kInt64).to_vector<int64_t>(), (std::vector<int64_t>{-2, 0, 0, 0, 2}));
  EXPECT_EQ(native::to(a, kInt32).to_vector<int32_t>(), (std::vector<int32_t>{-2, 0, 0, 0, 2}));
  EXPECT_TRUE(ref::matches(native::to(a, kBool), Array({5}, {1, 1, 0, 1, 1}), kBool));
  Tensor b = from_vector<bool>({true, false});
  EXPECT_TRUE(ref::matches(native::to(b, kFloat64), Array({2}, {1, 0}), kFloat64));
}

TEST(Conversion, BFloat16RoundsToNearestEven) {
  // bf16 keeps 8 significant bits: 1 + 2^-8 is a tie (to 1), 1 + 3*2^-8 a tie (to 1 + 2^-6).
  Tensor a = from_vector<float>({1.0f, 1.00390625f, 1.01171875f, 1.005f, -3.140625f, 65536.0f, 1e-3f});
  Tensor b = native::to(a, kBFloat16);
  EXPECT_EQ(b.dtype(), kBFloat16);
  EXPECT_EQ(b.element_size(), 2u);
  std::vector<float> got = native::to(b, kFloat32).to_vector<float>();
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[1], 1.0f);
  EXPECT_EQ(got[2], 1.015625f);
  EXPECT_EQ(got[3], 1.0078125f);  // 1.005 is nearer to 1 + 2^-7 than to 1
  EXPECT_EQ(got[4], -3.140625f);  // exactly representable
  EXPECT_EQ(got[5], 65536.0f);
  EXPECT_NEAR(got[6], 1e-3f, 1e-3f * 4e-3f);
  // The values read through the reference (which decodes bf16 independently) agree.
  EXPECT_TRUE(ref::matches(b, ref::read(native::to(b, kFloat32)), kBFloat16, {0, 0}));
}

TEST(Conversion, Float16RoundsOverflowsAndKeepsSubnormals) {
  Tensor a = from_vector<float>({1.0f, 1.00048828125f, 1.00146484375f, 65504.0f, 65520.0f, -70000.0f, 6e-8f,
                                 1e-8f, -2.5f});
  std::vector<float> got = native::to(native::to(a, kFloat16), kFloat32).to_vector<float>();
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[1], 1.0f);                  // 1 + 2^-11 is a tie: to even
  EXPECT_EQ(got[2], 1.001953125f);          // 1 + 3*2^-11 is a tie: to 1 + 2^-9
  EXPECT_EQ(got[3], 65504.0f);              // the largest half
  EXPECT_TRUE(std::isinf(got[4]) && got[4] > 0);
  EXPECT_TRUE(std::isinf(got[5]) && got[5] < 0);
  EXPECT_EQ(got[6], std::ldexp(1.0f, -24));  // the smallest subnormal
  EXPECT_EQ(got[7], 0.0f);
  EXPECT_EQ(got[8], -2.5f);
  // NaN survives both ways.
  Tensor n = native::to(native::to(from_vector<float>({NAN}), kFloat16), kFloat32);
  EXPECT_TRUE(std::isnan(n.item()));
}

TEST(Conversion, SixteenBitFloatsConvertToEveryDtype) {
  Array v({4}, {0, 1, -2, 3});
  for (DType half : {kBFloat16, kFloat16}) {
    Tensor h = native::to(ref::make(v, kFloat32), half);
    for (DType to : {kFloat32, kFloat64, kInt64, kInt32}) {
      SCOPED_TRACE(std::string(dtype_name(half)) + " -> " + dtype_name(to));
      EXPECT_TRUE(ref::matches(native::to(h, to), v, to));
    }
    EXPECT_TRUE(ref::matches(native::to(h, kBool), Array({4}, {0, 1, 1, 1}), kBool));
    Tensor other = native::to(h, half == kBFloat16 ? kFloat16 : kBFloat16);
    EXPECT_TRUE(ref::matches(native::to(other, kFloat32), v, kFloat32));
  }
}

TEST(Conversion, ToSameDtypeReturnsTheSameTensor) {
  Tensor a = zeros({3});
  EXPECT_TRUE(native::to(a, kFloat32).is_same(a));
  EXPECT_FALSE(native::to(a, kFloat64).storage().is_same(a.storage()));
}

TEST(Conversion, ToOfNonContiguousTensorIsContiguousWithSameValues) {
  Array v = ref::random({3, 5}, 3);
  for (Layout l : ref::all_layouts()) {
    SCOPED_TRACE(ref::layout_name(l));
    Tensor a = ref::make(v, kFloat32, l);
    Tensor b = native::to(a, kFloat64);
    EXPECT_TRUE(b.is_contiguous());
    EXPECT_TRUE(ref::matches(b, ref::read(a), kFloat64, {0, 0}));
  }
}

// ---- to(device) ------------------------------------------------------------------------------

TEST(Device, ToOtherCpuDeviceCopies) {
  Array v = ref::random({2, 3}, 4);
  Tensor a = ref::make(v, kFloat32, Layout::kTransposed);
  Tensor b = native::to(a, Device("cpu:1"));
  EXPECT_EQ(b.device(), Device::cpu(1));
  EXPECT_EQ(b.storage().device(), Device::cpu(1));
  EXPECT_FALSE(b.storage().is_same(a.storage()));
  EXPECT_TRUE(ref::matches(b, ref::read(a), kFloat32, {0, 0}));
  native::fill_(b, 9.0);
  EXPECT_TRUE(ref::matches(a, ref::read(ref::make(v, kFloat32)), kFloat32, {0, 0}));  // source untouched
  Tensor c = native::to(b, Device::cpu(0), kFloat64);
  EXPECT_EQ(c.device(), Device::cpu());
  EXPECT_TRUE(ref::matches(c, Array::filled({2, 3}, 9.0), kFloat64));
}

TEST(Device, ToSameDeviceReturnsTheSameTensor) {
  Tensor a = zeros({2}, TensorOptions().device("cpu:1"));
  EXPECT_TRUE(native::to(a, Device::cpu(1)).is_same(a));
  EXPECT_TRUE(native::to(a, Device::cpu(1), kFloat32).is_same(a));
}

TEST(Device, OpsKeepTheInputsDevice) {
  TensorOptions o = TensorOptions().device("cpu:1");
  Tensor a = ones({2, 2}, o), b = full({2}, 2.0, o);
  EXPECT_EQ(native::add(a, b).device(), Device::cpu(1));
  EXPECT_EQ(native::sum(a, {0}).device(), Device::cpu(1));
  EXPECT_EQ(native::mm(a, a).device(), Device::cpu(1));
  EXPECT_EQ(native::exp(a).device(), Device::cpu(1));
  EXPECT_TRUE(ref::matches(native::add(a, b), Array::filled({2, 2}, 3.0), kFloat32));
  EXPECT_EQ(arange(0, 3, 1, TensorOptions(kInt64).device("cpu:2")).device(), Device::cpu(2));
  EXPECT_EQ(eye(2, TensorOptions().device("cpu:2")).device(), Device::cpu(2));
}

// ---- clone, contiguous, copy_ ------------------------------------------------------------------

TEST(Tensor, CloneIsADeepContiguousCopy) {
  Array v = ref::random({3, 4}, 5);
  for (Layout l : ref::all_layouts()) {
    Tensor a = ref::make(v, kFloat64, l);
    Tensor c = native::clone(a);
    EXPECT_FALSE(c.storage().is_same(a.storage()));
    EXPECT_TRUE(c.is_contiguous());
    EXPECT_TRUE(ref::matches(c, v, kFloat64, {0, 0}));
    native::fill_(c, 0.0);
    EXPECT_TRUE(ref::matches(a, v, kFloat64, {0, 0}));
  }
}

TEST(Tensor, ContiguousCopiesOnlyWhenNeeded) {
  Tensor a = zeros({3, 4});
  EXPECT_TRUE(native::contiguous(a).is_same(a));
  Tensor sel = native::select(a, 0, 1);  // a contiguous view with an offset
  EXPECT_TRUE(sel.is_contiguous());
  EXPECT_TRUE(native::contiguous(sel).is_same(sel));
  Tensor unit = native::unsqueeze(a, 1);  // size-1 dims do not break contiguity
  EXPECT_TRUE(unit.is_contiguous());
  EXPECT_TRUE(native::contiguous(unit).is_same(unit));
  Array v = ref::random({3, 4}, 6);
  for (Layout l : {Layout::kTransposed, Layout::kStrided, Layout::kNarrowed}) {
    SCOPED_TRACE(ref::layout_name(l));
    Tensor nc = ref::make(v, kFloat32, l);
    EXPECT_FALSE(nc.is_contiguous());
    Tensor c = native::contiguous(nc);
    EXPECT_TRUE(c.is_contiguous());
    EXPECT_FALSE(c.storage().is_same(nc.storage()));
    EXPECT_EQ(c.strides(), (IntList{4, 1}));
    EXPECT_TRUE(ref::matches(c, ref::read(nc), kFloat32, {0, 0}));
  }
  Tensor ex = native::expand(zeros({3, 1}), {3, 4});
  EXPECT_FALSE(ex.is_contiguous());
  EXPECT_TRUE(native::contiguous(ex).is_contiguous());
}

TEST(Tensor, CopyBroadcastsConvertsAndWritesNonContiguousDestination) {
  Array src = ref::random({4}, 7, -5, 5, true);
  for (Layout l : ref::all_layouts()) {
    SCOPED_TRACE(ref::layout_name(l));
    Tensor dst = ref::make(Array::filled({3, 4}, 0), kFloat64, l);
    Tensor s = ref::make(src, kInt32);
    uint32_t v0 = dst.version();
    native::copy_(dst, s);
    EXPECT_EQ(dst.version(), v0 + 1);
    EXPECT_TRUE(ref::matches(dst, ref::zip(Array::filled({3, 4}, 0), src, [](double, double b) { return b; }),
                             kFloat64, {0, 0}));
  }
  // 0-element copies are no-ops.
  Tensor e = zeros({0, 2});
  EXPECT_NO_THROW(native::copy_(e, zeros({0, 2})));
}

TEST(Tensor, CopyShapeMismatchThrowsAndLeavesDestinationUnchanged) {
  Tensor dst = full({2, 3}, 1.0);
  const uint32_t v0 = dst.version();
  std::string msg = error_of<Error>([&] { native::copy_(dst, zeros({3, 2})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("copy_"), HasSubstr("[3, 2]")));
  // broadcasting that would grow the destination is also refused
  msg = error_of<Error>([&] { native::copy_(dst, zeros({4, 2, 3})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("copy_"), HasSubstr("[4, 2, 3]")));
  EXPECT_EQ(dst.version(), v0);
  EXPECT_TRUE(ref::matches(dst, Array::filled({2, 3}, 1.0), kFloat32));
}

TEST(Tensor, CopyAcrossCpuDevices) {
  Tensor src = from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor dst = zeros({2, 2}, TensorOptions(kFloat64).device("cpu:1"));
  native::copy_(dst, native::t(src));
  EXPECT_EQ(dst.device(), Device::cpu(1));
  EXPECT_TRUE(ref::matches(dst, Array({2, 2}, {1, 3, 2, 4}), kFloat64));
}

// ---- version counter ----------------------------------------------------------------------------

TEST(Tensor, VersionCounterIsSharedByViewsAndBumpedByInPlaceWrites) {
  Tensor a = zeros({4, 4});
  EXPECT_EQ(a.version(), 0u);
  Tensor v = native::narrow(native::transpose(a, 0, 1), 0, 1, 2);
  native::add_(v, 1.0);
  EXPECT_EQ(a.version(), 1u);
  EXPECT_EQ(v.version(), 1u);
  native::mul_(a, 2.0);
  EXPECT_EQ(v.version(), 2u);
  native::zero_(v);
  EXPECT_EQ(a.version(), 3u);
  Tensor c = native::clone(a);
  EXPECT_NE(c.impl()->version, a.impl()->version);  // a copy has its own counter
  const uint32_t cv = c.version();
  native::fill_(c, 1);
  EXPECT_EQ(c.version(), cv + 1);
  EXPECT_EQ(a.version(), 3u);
}

TEST(Tensor, FailedInPlaceOpDoesNotBumpTheVersion) {
  Tensor a = zeros({2, 3});
  EXPECT_THROW(native::add_(a, zeros({3, 3})), ValueError);
  EXPECT_THROW(native::mul_(a, zeros({2, 3}, TensorOptions().device("cpu:1"))), Error);
  EXPECT_EQ(a.version(), 0u);
}

// ---- printing ----------------------------------------------------------------------------------

TEST(Print, StrShowsValuesInPyTorchStyle) {
  Tensor a = from_vector<float>({1, 2.5f, -3, 4}, {2, 2});
  std::string s = a.str();
  EXPECT_THAT(s, AllOf(HasSubstr("tensor("),
                        HasSubstr("1.0000"),
                        HasSubstr("2.5000"),
                        HasSubstr("-3.0000"),
                        HasSubstr("4.0000")));
  EXPECT_EQ(s, "tensor([[1.0000, 2.5000],\n        [-3.0000, 4.0000]])");
  EXPECT_THAT(s, Not(HasSubstr("dtype")));  // float32 is the default, not printed
  std::ostringstream os;
  os << a;
  EXPECT_EQ(os.str(), s);
}

TEST(Print, StrNamesNonDefaultDtypeAndDevice) {
  EXPECT_THAT(from_vector<double>({0.5, 1}).str(), HasSubstr("dtype=float64"));
  EXPECT_THAT(from_vector<int32_t>({1, 2}).str(), HasSubstr("dtype=int32"));
  EXPECT_THAT(from_vector<bool>({true, false}).str(), HasSubstr("dtype=bool"));
  std::string i = from_vector<int64_t>({1, -2, 30}).str();
  EXPECT_EQ(i, "tensor([1, -2, 30])");
  std::string d = native::to(from_vector<float>({1}, {1}), Device("cpu:1")).str();
  EXPECT_THAT(d, AllOf(HasSubstr("device='cpu:1'"), HasSubstr("1.0000")));
  EXPECT_THAT(native::to(from_vector<float>({1.5f, 2}), kBFloat16).str(), HasSubstr("1.5000"));
}

TEST(Print, StrOfScalarEmptyAndNonContiguousTensors) {
  EXPECT_EQ(scalar_tensor(3.25).str(), "tensor(3.2500)");
  EXPECT_EQ(zeros({0}).str(), "tensor([])");
  Tensor t = native::t(from_vector<int64_t>({1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(t.str(), "tensor([[1, 3],\n        [2, 4]])");
}

TEST(Print, LongDimensionsAreSummarizedKeepingTheEdges) {
  Tensor a = arange(100);
  std::string s = a.str();
  EXPECT_THAT(s, AllOf(HasSubstr("0, 1, 2"), HasSubstr("..."), HasSubstr("97, 98, 99")));
  EXPECT_THAT(s, Not(HasSubstr(" 50,")));
}

}  // namespace
}  // namespace ember
