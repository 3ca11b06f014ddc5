// The op table of ember_core: every ember::native op (element-wise, in place, reductions,
// matrix products, indexing, selection, softmax) run over dtypes, shapes (0-dim, 0-element,
// broadcast) and memory layouts (contiguous, transposed, strided, narrowed, expanded) and
// compared with the plain loops of tests/support/reference.h; then the error cases, each
// checked for its ember::Error subclass and a message naming the op and the offending value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/error_text.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "tests/support/reference.h"

namespace ember {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ref::Array;
using ref::Layout;

const std::vector<DType> kAll = {kFloat32, kFloat64, kInt64, kInt32, kBool};
const std::vector<DType> kNumeric = {kFloat32, kFloat64, kInt64, kInt32};
const std::vector<DType> kFloating = {kFloat32, kFloat64};

using support::error_of;

std::string trace(const char* op, DType dt, Layout l, const IntList& shape) {
  return std::string(op) + " " + dtype_name(dt) + " " + ref::layout_name(l) + " " + ref::shape_str(shape);
}

/// Random values suited to dtype: reals in [lo, hi), integers in [ceil(lo), floor(hi)], bools.
Tensor input(DType dt, const IntList& shape, uint32_t seed, double lo = -3, double hi = 3,
             Layout layout = Layout::kContiguous) {
  Array v;
  if (dt == kBool) {
    v = ref::random(shape, seed, 0, 2, true);
  } else if (is_integral(dt)) {
    v = ref::random(shape, seed, std::ceil(lo), std::floor(hi) + 1, true);
  } else {
    v = ref::random(shape, seed, lo, hi);
  }
  return ref::make(v, dt, layout);
}

const std::vector<IntList> kShapes = {{}, {0}, {7}, {3, 4}, {2, 3, 4}, {2, 0, 3}};

// PyTorch's promotion table for two dimensioned operands, written out.
DType expected_promotion(DType a, DType b) {
  auto rank = [](DType t) {
    switch (t) {
      case DType::Bool: return 0;
      case DType::Int32: return 1;
      case DType::Int64: return 2;
      case DType::Float32: return 3;
      case DType::Float64: return 4;
      default: return -1;
    }
  };
  return rank(a) >= rank(b) ? a : b;
}

// ---- element-wise, unary --------------------------------------------------------------------

enum class OutRule { kSame, kFloat, kBool, kScalarFrac, kScalarInt };

DType out_dtype(OutRule r, DType in) {
  switch (r) {
    case OutRule::kSame: return in;
    case OutRule::kFloat: return is_floating_point(in) ? in : kFloat32;
    case OutRule::kBool: return kBool;
    case OutRule::kScalarFrac: return is_floating_point(in) ? in : kFloat32;
    case OutRule::kScalarInt: return in == kBool ? kInt64 : in;
  }
  return in;
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  OutRule out;
  std::vector<DType> dtypes;
  double lo = -3, hi = 3;
};

double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

const std::vector<UnaryCase>& unary_cases() {
  using N = OutRule;
  static const std::vector<UnaryCase> kCases = {
      {"neg", [](const Tensor& x) { return native::neg(x); }, [](double x) { return -x; }, N::kSame, kNumeric},
      {"abs", [](const Tensor& x) { return native::abs(x); }, [](double x) { return std::fabs(x); }, N::kSame, kNumeric},
      {"sign", [](const Tensor& x) { return native::sign(x); }, [](double x) { return double((x > 0) - (x < 0)); },
       N::kSame, kNumeric},
      {"relu", [](const Tensor& x) { return native::relu(x); }, [](double x) { return x > 0 ? x : 0; }, N::kSame, kNumeric},
      {"exp", [](const Tensor& x) { return native::exp(x); }, [](double x) { return std::exp(x); }, N::kFloat, kNumeric},
      {"log", [](const Tensor& x) { return native::log(x); }, [](double x) { return std::log(x); }, N::kFloat, kNumeric,
       0.1, 5},
      {"log1p", [](const Tensor& x) { return native::log1p(x); }, [](double x) { return std::log1p(x); }, N::kFloat,
       kNumeric, -0.5, 3},
      {"sqrt", [](const Tensor& x) { return native::sqrt(x); }, [](double x) { return std::sqrt(x); }, N::kFloat,
       kNumeric, 0, 9},
      {"rsqrt", [](const Tensor& x) { return native::rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, N::kFloat,
       kNumeric, 0.25, 9},
      {"reciprocal", [](const Tensor& x) { return native::reciprocal(x); }, [](double x) { return 1 / x; }, N::kFloat,
       kNumeric, 0.25, 4},
      {"sin", [](const Tensor& x) { return native::sin(x); }, [](double x) { return std::sin(x); }, N::kFloat, kNumeric},
      {"cos", [](const Tensor& x) { return native::cos(x); }, [](double x) { return std::cos(x); }, N::kFloat, kNumeric},
      {"tanh", [](const Tensor& x) { return native::tanh(x); }, [](double x) { return std::tanh(x); }, N::kFloat, kNumeric},
      {"sigmoid", [](const Tensor& x) { return native::sigmoid(x); }, sigmoid_ref, N::kFloat, kNumeric},
      {"gelu", [](const Tensor& x) { return native::gelu(x); }, gelu_ref, N::kFloat, kNumeric},
      {"erf", [](const Tensor& x) { return native::erf(x); }, [](double x) { return std::erf(x); }, N::kFloat, kNumeric},
      {"isnan", [](const Tensor& x) { return native::isnan(x); }, [](double x) { return double(std::isnan(x)); },
       N::kBool, kAll},
      {"isfinite", [](const Tensor& x) { return native::isfinite(x); }, [](double x) { return double(std::isfinite(x)); },
       N::kBool, kAll},
      {"logical_not", [](const Tensor& x) { return native::logical_not(x); }, [](double x) { return double(x == 0); },
       N::kBool, kAll},
      {"clamp(-1,2)", [](const Tensor& x) { return native::clamp(x, -1.0, 2.0); },
       [](double x) { return std::min(std::max(x, -1.0), 2.0); }, N::kSame, kNumeric},
      {"clamp(min=0.5)", [](const Tensor& x) { return native::clamp(x, 0.5, std::nullopt); },
       [](double x) { return std::max(x, 0.5); }, N::kSame, kFloating},
      {"clamp(max=1)", [](const Tensor& x) { return native::clamp(x, std::nullopt, 1.0); },
       [](double x) { return std::min(x, 1.0); }, N::kSame, kNumeric},
      {"add(x,2.5)", [](const Tensor& x) { return native::add(x, 2.5); }, [](double x) { return x + 2.5; },
       N::kScalarFrac, kAll},
      {"add(x,2)", [](const Tensor& x) { return native::add(x, 2.0); }, [](double x) { return x + 2; }, N::kScalarInt,
       kAll},
      {"mul(x,-1.5)", [](const Tensor& x) { return native::mul(x, -1.5); }, [](double x) { return x * -1.5; },
       N::kScalarFrac, kAll},
      {"mul(x,3)", [](const Tensor& x) { return native::mul(x, 3.0); }, [](double x) { return x * 3; }, N::kScalarInt,
       kAll},
      {"div(x,4)", [](const Tensor& x) { return native::div(x, 4.0); }, [](double x) { return x / 4; }, N::kFloat, kAll},
      {"rsub(x,1)", [](const Tensor& x) { return native::rsub(x, 1.0); }, [](double x) { return 1 - x; }, N::kScalarInt,
       kAll},
      {"rsub(x,0.5)", [](const Tensor& x) { return native::rsub(x, 0.5); }, [](double x) { return 0.5 - x; },
       N::kScalarFrac, kNumeric},
      {"pow(x,2)", [](const Tensor& x) { return native::pow(x, 2.0); }, [](double x) { return x * x; }, N::kSame,
       kNumeric},
      {"pow(x,0.5)", [](const Tensor& x) { return native::pow(x, 0.5); }, [](double x) { return std::sqrt(x); },
       N::kFloat, kFloating, 0, 9},
      {"pow(x,-1.5)", [](const Tensor& x) { return native::pow(x, -1.5); }, [](double x) { return std::pow(x, -1.5); },
       N::kFloat, kFloating, 0.5, 4},
      {"pow(x,1)", [](const Tensor& x) { return native::pow(x, 1.0); }, [](double x) { return x; }, N::kSame, kNumeric},
      {"eq(x,1)", [](const Tensor& x) { return native::eq(x, 1.0); }, [](double x) { return double(x == 1); }, N::kBool,
       kAll},
      {"ne(x,1)", [](const Tensor& x) { return native::ne(x, 1.0); }, [](double x) { return double(x != 1); }, N::kBool,
       kAll},
      {"lt(x,0.5)", [](const Tensor& x) { return native::lt(x, 0.5); }, [](double x) { return double(x < 0.5); },
       N::kBool, kAll},
      {"le(x,1)", [](const Tensor& x) { return native::le(x, 1.0); }, [](double x) { return double(x <= 1); }, N::kBool,
       kAll},
      {"gt(x,-0.5)", [](const Tensor& x) { return native::gt(x, -0.5); }, [](double x) { return double(x > -0.5); },
       N::kBool, kAll},
      {"ge(x,0)", [](const Tensor& x) { return native::ge(x, 0.0); }, [](double x) { return double(x >= 0); }, N::kBool,
       kAll},
  };
  return kCases;
}

TEST(Unary, EveryOpMatchesTheReferenceOverDtypesShapesAndLayouts) {
  uint32_t seed = 100;
  for (const auto& c : unary_cases()) {
    for (DType dt : c.dtypes) {
      for (const IntList& shape : kShapes) {
        for (Layout l : ref::all_layouts()) {
          SCOPED_TRACE(trace(c.name, dt, l, shape));
          Tensor x = input(dt, shape, seed++, c.lo, c.hi, l);
          Array want = ref::map(ref::read(x), c.ref);
          Tensor y = c.op(x);
          EXPECT_TRUE(ref::matches(y, want, out_dtype(c.out, dt)));
          EXPECT_EQ(y.sizes(), shape);
          EXPECT_FALSE(y.storage().is_same(x.storage()));  // out of place
        }
      }
    }
  }
}

TEST(Unary, SpecialFloatingValues) {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dt : kFloating) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = ref::make(Array({5}, {NAN, inf, -inf, 0.0, -1.0}), dt);
    EXPECT_TRUE(ref::matches(native::isnan(x), Array({5}, {1, 0, 0, 0, 0}), kBool));
    EXPECT_TRUE(ref::matches(native::isfinite(x), Array({5}, {0, 0, 0, 1, 1}), kBool));
    EXPECT_TRUE(ref::matches(native::exp(x), Array({5}, {NAN, inf, 0, 1, std::exp(-1.0)}), dt));
    EXPECT_TRUE(ref::matches(native::log(x), Array({5}, {NAN, inf, NAN, -inf, NAN}), dt));
    EXPECT_TRUE(ref::matches(native::relu(native::narrow(x, 0, 1, 4)), Array({4}, {inf, 0, 0, 0}), dt));
    EXPECT_TRUE(ref::matches(native::sigmoid(x), Array({5}, {NAN, 1, 0, 0.5, sigmoid_ref(-1)}), dt));
    EXPECT_TRUE(ref::matches(native::tanh(x), Array({5}, {NAN, 1, -1, 0, std::tanh(-1.0)}), dt));
    EXPECT_TRUE(ref::matches(native::clamp(x, -2.0, 2.0), Array({5}, {NAN, 2, -2, 0, -1}), dt));
    EXPECT_TRUE(ref::matches(native::reciprocal(ref::make(Array({2}, {0.0, -0.0}), dt)), Array({2}, {inf, -inf}), dt));
  }
}

// PyTorch's relu propagates NaN; a plain `x > 0 ? x : 0` would map it to 0 (a bug once seen
// in UnaryF's Relu), on the vectorized compile-time path as on the generic one.
TEST(Unary, ReluPropagatesNan) {
  EXPECT_TRUE(ref::matches(native::relu(from_vector<float>({NAN, -1}, {2})), Array({2}, {NAN, 0}), kFloat32));
}

TEST(Unary, NegOfBoolThrowsTypeErrorPointingToLogicalNot) {
  std::string msg = error_of<TypeError>([] { native::neg(from_vector<bool>({true})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("neg"), HasSubstr("logical_not")));
}

TEST(Unary, SixteenBitFloatsComputeOnCpuThroughFloat32) {
  // Note [16-bit floats on CPU]; exactness per op is in half_cpu_ops_test.
  Tensor h = native::to(zeros({2}), kBFloat16);
  Tensor e = native::exp(h);
  EXPECT_EQ(e.dtype(), kBFloat16);
  EXPECT_EQ(native::to(e, kFloat32).to_vector<float>(), std::vector<float>(2, 1.0f));
  Tensor a = native::add(native::to(ones({2}), kFloat16), native::to(ones({2}), kFloat16));
  EXPECT_EQ(a.dtype(), kFloat16);
  EXPECT_EQ(native::to(a, kFloat32).to_vector<float>(), std::vector<float>(2, 2.0f));
}

TEST(Unary, ClampWithoutBoundsThrowsValueError) {
  EXPECT_THAT(error_of<ValueError>([] { native::clamp(zeros({2}), std::nullopt, std::nullopt); }),
              HasSubstr("clamp"));
}

// ---- element-wise, binary --------------------------------------------------------------------

enum class BinOut { kPromote, kPromoteFloat, kBool };

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> ref;
  BinOut out;
  std::vector<DType> dtypes;
  double alo = -3, ahi = 3, blo = -3, bhi = 3;
};

double gelu_backward_ref(double g, double x) {
  const double pi = 3.14159265358979323846;
  return g * (0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * pi));
}

const std::vector<BinaryCase>& binary_cases() {
  using B = BinOut;
  const std::vector<DType> num_bool = kAll;
  static const std::vector<BinaryCase> kCases = {
      {"add", [](const Tensor& a, const Tensor& b) { return native::add(a, b); },
       [](double x, double y) { return x + y; }, B::kPromote, kNumeric},
      {"add(alpha=2)", [](const Tensor& a, const Tensor& b) { return native::add(a, b, 2.0); },
       [](double x, double y) { return x + 2 * y; }, B::kPromote, kNumeric},
      {"add(alpha=-0.5)", [](const Tensor& a, const Tensor& b) { return native::add(a, b, -0.5); },
       [](double x, double y) { return x - 0.5 * y; }, B::kPromote, kFloating},
      {"sub", [](const Tensor& a, const Tensor& b) { return native::sub(a, b); },
       [](double x, double y) { return x - y; }, B::kPromote, kNumeric},
      {"sub(alpha=3)", [](const Tensor& a, const Tensor& b) { return native::sub(a, b, 3.0); },
       [](double x, double y) { return x - 3 * y; }, B::kPromote, kNumeric},
      {"mul", [](const Tensor& a, const Tensor& b) { return native::mul(a, b); },
       [](double x, double y) { return x * y; }, B::kPromote, num_bool},
      {"div", [](const Tensor& a, const Tensor& b) { return native::div(a, b); },
       [](double x, double y) { return x / y; }, B::kPromoteFloat, kNumeric, -3, 3, 1, 4},
      {"pow", [](const Tensor& a, const Tensor& b) { return native::pow(a, b); },
       [](double x, double y) { return std::pow(x, y); }, B::kPromote, kFloating, 0.5, 3, -2, 2},
      {"pow(int)", [](const Tensor& a, const Tensor& b) { return native::pow(a, b); },
       [](double x, double y) { return std::pow(x, y); }, B::kPromote, {kInt64, kInt32}, -3, 3, 0, 4},
      {"maximum", [](const Tensor& a, const Tensor& b) { return native::maximum(a, b); },
       [](double x, double y) { return std::max(x, y); }, B::kPromote, num_bool},
      {"minimum", [](const Tensor& a, const Tensor& b) { return native::minimum(a, b); },
       [](double x, double y) { return std::min(x, y); }, B::kPromote, num_bool},
      {"eq", [](const Tensor& a, const Tensor& b) { return native::eq(a, b); },
       [](double x, double y) { return double(x == y); }, B::kBool, num_bool, -2, 2, -2, 2},
      {"ne", [](const Tensor& a, const Tensor& b) { return native::ne(a, b); },
       [](double x, double y) { return double(x != y); }, B::kBool, num_bool, -2, 2, -2, 2},
      {"lt", [](const Tensor& a, const Tensor& b) { return native::lt(a, b); },
       [](double x, double y) { return double(x < y); }, B::kBool, num_bool},
      {"le", [](const Tensor& a, const Tensor& b) { return native::le(a, b); },
       [](double x, double y) { return double(x <= y); }, B::kBool, num_bool, -2, 2, -2, 2},
      {"gt", [](const Tensor& a, const Tensor& b) { return native::gt(a, b); },
       [](double x, double y) { return double(x > y); }, B::kBool, num_bool},
      {"ge", [](const Tensor& a, const Tensor& b) { return native::ge(a, b); },
       [](double x, double y) { return double(x >= y); }, B::kBool, num_bool, -2, 2, -2, 2},
      {"logical_and", [](const Tensor& a, const Tensor& b) { return native::logical_and(a, b); },
       [](double x, double y) { return double(x != 0 && y != 0); }, B::kBool, num_bool, -1, 1, -1, 1},
      {"logical_or", [](const Tensor& a, const Tensor& b) { return native::logical_or(a, b); },
       [](double x, double y) { return double(x != 0 || y != 0); }, B::kBool, num_bool, -1, 1, -1, 1},
      {"tanh_backward", [](const Tensor& a, const Tensor& b) { return native::tanh_backward(a, b); },
       [](double g, double y) { return g * (1 - y * y); }, B::kPromote, kFloating, -3, 3, -1, 1},
      {"sigmoid_backward", [](const Tensor& a, const Tensor& b) { return native::sigmoid_backward(a, b); },
       [](double g, double y) { return g * y * (1 - y); }, B::kPromote, kFloating, -3, 3, 0, 1},
      {"relu_backward", [](const Tensor& a, const Tensor& b) { return native::relu_backward(a, b); },
       [](double g, double x) { return x > 0 ? g : 0; }, B::kPromote, kFloating},
      {"gelu_backward", [](const Tensor& a, const Tensor& b) { return native::gelu_backward(a, b); },
       gelu_backward_ref, B::kPromote, kFloating},
  };
  return kCases;
}

// (a shape, b shape): equal, broadcast both ways, 0-dim on either side, 0-element.
const std::vector<std::pair<IntList, IntList>> kBinaryShapes = {
    {{3, 4}, {3, 4}}, {{3, 1, 4}, {2, 1}}, {{2, 1}, {3, 1, 4}}, {{}, {2, 3}}, {{2, 3}, {}},
    {{}, {}},         {{0, 3}, {1, 3}},    {{5}, {1}},          {{4, 1}, {1, 5}}};

TEST(Binary, EveryOpMatchesTheReferenceWithBroadcastingAndLayouts) {
  uint32_t seed = 5000;
  for (const auto& c : binary_cases()) {
    for (DType dt : c.dtypes) {
      for (const auto& [sa, sb] : kBinaryShapes) {
        for (Layout l : ref::all_layouts()) {
          SCOPED_TRACE(trace(c.name, dt, l, sa) + " with " + ref::shape_str(sb));
          Tensor a = input(dt, sa, seed++, c.alo, c.ahi, l);
          Layout lb = l == Layout::kContiguous ? Layout::kTransposed : Layout::kContiguous;
          Tensor b = input(dt, sb, seed++, c.blo, c.bhi, lb);
          Array want = ref::zip(ref::read(a), ref::read(b), c.ref);
          DType od = c.out == BinOut::kBool ? kBool
                     : c.out == BinOut::kPromoteFloat ? (is_floating_point(dt) ? dt : kFloat32)
                                                      : dt;
          Tensor y = c.op(a, b);
          EXPECT_TRUE(ref::matches(y, want, od));
        }
      }
    }
  }
}

TEST(Binary, ExpandedTransposedAndSteppedViewsAsInputs) {
  // Inputs made by the view ops themselves rather than by the reference builder.
  Array av = ref::random({3, 1, 4}, 1), bv = ref::random({4, 6}, 2);
  Tensor a = native::expand(ref::make(av, kFloat32), {3, 2, 4});                   // stride 0
  Tensor b = native::slice(native::t(ref::make(bv, kFloat32)), 1, 0, 4, 2);        // [6,4] -> [6,2]
  Tensor b2 = native::narrow(native::transpose(native::unsqueeze(b, 0), 1, 2), 2, 1, 4);  // [1,2,6] -> [1,2,4]
  ASSERT_FALSE(a.is_contiguous());
  ASSERT_FALSE(b2.is_contiguous());
  Array ra = ref::read(a), rb = ref::read(b2);
  EXPECT_TRUE(ref::matches(native::add(a, b2), ref::zip(ra, rb, [](double x, double y) { return x + y; }), kFloat32));
  EXPECT_TRUE(ref::matches(native::mul(b2, b2), ref::zip(rb, rb, [](double x, double y) { return x * y; }), kFloat32));
  // The operand aliasing itself through a transpose.
  Tensor sq = ref::make(ref::random({4, 4}, 3), kFloat64);
  Tensor st = native::t(sq);
  EXPECT_TRUE(ref::matches(native::sub(sq, st), ref::zip(ref::read(sq), ref::read(st), [](double x, double y) {
                             return x - y;
                           }),
                           kFloat64));
}

TEST(Binary, PromotionTableForEveryDtypePair) {
  for (DType da : kAll) {
    for (DType db : kAll) {
      SCOPED_TRACE(std::string(dtype_name(da)) + " * " + dtype_name(db));
      Tensor a = input(da, {2, 3}, 1, -3, 3), b = input(db, {3}, 2, -3, 3);
      DType want = expected_promotion(da, db);
      Tensor y = native::mul(a, b);
      EXPECT_TRUE(ref::matches(y, ref::zip(ref::read(a), ref::read(b), [](double x, double z) { return x * z; }), want));
      if (!(da == kBool && db == kBool)) {
        Tensor s = native::add(a, b);
        EXPECT_EQ(s.dtype(), want);
        EXPECT_TRUE(ref::matches(s, ref::zip(ref::read(a), ref::read(b), [](double x, double z) { return x + z; }), want));
      }
      EXPECT_EQ(native::maximum(a, b).dtype(), want);
      EXPECT_EQ(native::lt(a, b).dtype(), kBool);
      EXPECT_EQ(native::div(a, b).dtype(), is_floating_point(want) ? want : kFloat32);
    }
  }
}

TEST(Binary, SpecificPromotions) {
  // int64 + float32 -> float32
  Tensor i = from_vector<int64_t>({1, 2, 3}), f = from_vector<float>({0.5f, 0.25f, -1});
  EXPECT_TRUE(ref::matches(native::add(i, f), Array({3}, {1.5, 2.25, 2}), kFloat32));
  // a 0-dim float64 with a float32 tensor -> float32 (0-dim operands do not widen within a category)
  Tensor d0 = scalar_tensor(0.1, kFloat64);
  Tensor r = native::add(f, d0);
  EXPECT_TRUE(ref::matches(r, Array({3}, {0.5f + 0.1f, 0.25f + 0.1f, -1 + 0.1f}), kFloat32));
  EXPECT_EQ(native::add(d0, f).dtype(), kFloat32);
  // a 0-dim int64 with an int32 tensor -> int32; a 0-dim float with an int tensor -> the float
  EXPECT_EQ(native::add(from_vector<int32_t>({1}, {1}), scalar_tensor(2, kInt64)).dtype(), kInt32);
  EXPECT_EQ(native::add(i, scalar_tensor(2, kFloat64)).dtype(), kFloat64);
  EXPECT_EQ(native::mul(from_vector<bool>({true, false}), scalar_tensor(3, kInt32)).dtype(), kInt32);
  // two 0-dim tensors promote normally
  EXPECT_EQ(native::add(scalar_tensor(1, kFloat32), scalar_tensor(1, kFloat64)).dtype(), kFloat64);
  // int tensor + 2.5 -> float32; + 2.0 keeps int; bool + 1.0 -> int64
  EXPECT_TRUE(ref::matches(native::add(i, 2.5), Array({3}, {3.5, 4.5, 5.5}), kFloat32));
  EXPECT_TRUE(ref::matches(native::add(i, 2.0), Array({3}, {3, 4, 5}), kInt64));
  EXPECT_TRUE(ref::matches(native::mul(from_vector<int32_t>({3, -4}), 0.5), Array({2}, {1.5, -2}), kFloat32));
  EXPECT_TRUE(ref::matches(native::add(from_vector<bool>({true, false}), 1.0), Array({2}, {2, 1}), kInt64));
  EXPECT_TRUE(ref::matches(native::add(ref::make(Array({2}, {1, 2}), kFloat64), 2.5), Array({2}, {3.5, 4.5}), kFloat64));
  // int / int is true division in float32
  EXPECT_TRUE(ref::matches(native::div(from_vector<int64_t>({7, -7}), from_vector<int64_t>({2, 2})),
                           Array({2}, {3.5, -3.5}), kFloat32));
  EXPECT_TRUE(ref::matches(native::div(from_vector<int64_t>({1}, {1}), from_vector<int64_t>({0}, {1})),
                           Array({1}, {std::numeric_limits<double>::infinity()}), kFloat32));
}

TEST(Binary, NanPropagatesThroughMaximumAndMinimum) {
  Tensor a = from_vector<float>({NAN, 1, 2}), b = from_vector<float>({0, NAN, 1});
  EXPECT_TRUE(ref::matches(native::maximum(a, b), Array({3}, {NAN, NAN, 2}), kFloat32));
  EXPECT_TRUE(ref::matches(native::minimum(a, b), Array({3}, {NAN, NAN, 1}), kFloat32));
}

TEST(Binary, BadShapesAndDevicesThrowNamingTheOp) {
  Tensor a = zeros({2, 3}), b = zeros({2, 4});
  std::string msg = error_of<ValueError>([&] { native::add(a, b); });
  EXPECT_THAT(msg, AllOf(HasSubstr("add"), HasSubstr("(3)"), HasSubstr("(4)"), HasSubstr("[2, 3]")));
  EXPECT_THAT(error_of<ValueError>([&] { native::mul(a, zeros({3, 2})); }), HasSubstr("mul"));
  EXPECT_THAT(error_of<ValueError>([&] { native::eq(a, zeros({4})); }), HasSubstr("eq"));
  Tensor c1 = zeros({2, 3}, TensorOptions().device("cpu:1"));
  msg = error_of<Error>([&] { native::sub(a, c1); });
  EXPECT_THAT(msg, AllOf(HasSubstr("sub"), HasSubstr("cpu:0"), HasSubstr("cpu:1")));
  msg = error_of<TypeError>([] { native::sub(from_vector<bool>({true}), from_vector<bool>({true})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("sub"), HasSubstr("bool")));
}

// ---- selection: where, masked_fill ----------------------------------------------------------------

TEST(Select, WhereBroadcastsAllThreeOperandsAndPromotes) {
  Tensor cond = ref::make(Array({3, 1}, {1, 0, 1}), kBool, Layout::kStrided);
  for (Layout l : ref::all_layouts()) {
    SCOPED_TRACE(ref::layout_name(l));
    Tensor a = input(kInt64, {1, 4}, 7, -5, 5, l);
    Tensor b = scalar_tensor(0.5, kFloat32);
    Tensor y = native::where(cond, a, b);
    Array want = ref::zip3(ref::read(cond), ref::read(a), ref::read(b),
                           [](double c, double x, double z) { return c != 0 ? x : z; });
    EXPECT_TRUE(ref::matches(y, want, kFloat32));
  }
  for (DType dt : kAll) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor c = input(kBool, {2, 3}, 8), a = input(dt, {2, 3}, 9), b = input(dt, {3}, 10, -3, 3, Layout::kStrided);
    Array want = ref::zip3(ref::read(c), ref::read(a), ref::read(b),
                           [](double cc, double x, double z) { return cc != 0 ? x : z; });
    EXPECT_TRUE(ref::matches(native::where(c, a, b), want, dt));
  }
  Tensor e = native::where(zeros({0, 2}, kBool), zeros({0, 2}), ones({2}));
  EXPECT_EQ(e.sizes(), (IntList{0, 2}));
}

TEST(Select, WhereBadConditionShapeOrDeviceThrows) {
  std::string msg = error_of<TypeError>([] { native::where(zeros({2}), zeros({2}), zeros({2})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("where"), HasSubstr("float32")));
  EXPECT_THAT(error_of<ValueError>([] { native::where(zeros({3}, kBool), zeros({2}), zeros({2})); }),
              HasSubstr("where"));
  msg = error_of<Error>([] { native::where(zeros({2}, kBool), zeros({2}), zeros({2}, TensorOptions().device("cpu:1"))); });
  EXPECT_THAT(msg, AllOf(HasSubstr("where"), HasSubstr("cpu:1")));
}

TEST(Select, MaskedFillBroadcastsTheMaskOverEveryDtypeAndLayout) {
  for (DType dt : kAll) {
    for (Layout l : ref::all_layouts()) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + ref::layout_name(l));
      Tensor a = input(dt, {3, 4}, 11, -3, 3, l);
      Tensor mask = input(kBool, {3, 1}, 12);
      Array before = ref::read(a);
      double value = dt == kBool ? 1 : -7;
      Array want = ref::zip(before, ref::read(mask), [&](double x, double m) { return m != 0 ? value : x; });
      Tensor y = native::masked_fill(a, mask, value);
      EXPECT_TRUE(ref::matches(y, want, dt));
      EXPECT_TRUE(ref::matches(a, before, dt));  // out of place
      uint32_t v0 = a.version();
      native::masked_fill_(a, native::expand(input(kBool, {4}, 13), {3, 4}), value);
      EXPECT_EQ(a.version(), v0 + 1);
      Array want2 = ref::zip(before, ref::read(input(kBool, {4}, 13)), [&](double x, double m) { return m != 0 ? value : x; });
      EXPECT_TRUE(ref::matches(a, want2, dt));
    }
  }
}

TEST(Select, MaskedFillWithALargerMaskDoesNotWriteIntoItsInput) {
  // Regression: the out-of-place op used to fill a view of its input when the broadcast
  // result (here [1, 4]) was itself contiguous.
  Tensor a = from_vector<float>({1, 2, 3, 4});
  Tensor mask = from_vector<bool>({true, false, true, false}, {1, 4});
  Tensor y = native::masked_fill(a, mask, 0.0);
  EXPECT_TRUE(ref::matches(y, Array({1, 4}, {0, 2, 0, 4}), kFloat32));
  EXPECT_TRUE(ref::matches(a, Array({4}, {1, 2, 3, 4}), kFloat32));
  Tensor big = native::masked_fill(a, ref::make(Array({2, 4}, {1, 0, 0, 0, 0, 0, 0, 1}), kBool), 9.0);
  EXPECT_TRUE(ref::matches(big, Array({2, 4}, {9, 2, 3, 4, 1, 2, 3, 9}), kFloat32));
  EXPECT_TRUE(ref::matches(a, Array({4}, {1, 2, 3, 4}), kFloat32));
}

TEST(Select, MaskedFillErrorsLeaveSelfUnchanged) {
  Tensor a = full({2, 3}, 1.0);
  const uint32_t v0 = a.version();
  std::string msg = error_of<TypeError>([&] { native::masked_fill_(a, zeros({2, 3}), 5.0); });
  EXPECT_THAT(msg, AllOf(HasSubstr("masked_fill_"), HasSubstr("float32")));
  msg = error_of<ValueError>([&] { native::masked_fill_(a, zeros({3, 3}, kBool), 5.0); });
  EXPECT_THAT(msg, AllOf(HasSubstr("masked_fill_"), HasSubstr("[3, 3]")));
  EXPECT_THROW(native::masked_fill_(a, zeros({4, 2, 3}, kBool), 5.0), Error);
  EXPECT_EQ(a.version(), v0);
  EXPECT_TRUE(ref::matches(a, Array::filled({2, 3}, 1.0), kFloat32));
}

// ---- in place -------------------------------------------------------------------------------------

struct InplaceCase {
  const char* name;
  std::function<void(Tensor&, const Tensor&, const Tensor&)> op;  // (self, a, b)
  std::function<double(double, double, double)> ref;              // (self, a, b)
  std::vector<DType> dtypes;
};

const std::vector<InplaceCase>& inplace_cases() {
  static const std::vector<InplaceCase> kCases = {
      {"add_", [](Tensor& s, const Tensor& a, const Tensor&) { native::add_(s, a); },
       [](double s, double a, double) { return s + a; }, kNumeric},
      {"add_(alpha=2)", [](Tensor& s, const Tensor& a, const Tensor&) { native::add_(s, a, 2.0); },
       [](double s, double a, double) { return s + 2 * a; }, kNumeric},
      {"add_(scalar)", [](Tensor& s, const Tensor&, const Tensor&) { native::add_(s, 1.5); },
       [](double s, double, double) { return s + 1.5; }, kFloating},
      {"add_(int scalar)", [](Tensor& s, const Tensor&, const Tensor&) { native::add_(s, 3.0); },
       [](double s, double, double) { return s + 3; }, kNumeric},
      {"mul_", [](Tensor& s, const Tensor& a, const Tensor&) { native::mul_(s, a); },
       [](double s, double a, double) { return s * a; }, kNumeric},
      {"mul_(scalar)", [](Tensor& s, const Tensor&, const Tensor&) { native::mul_(s, -2.0); },
       [](double s, double, double) { return s * -2; }, kNumeric},
      {"div_", [](Tensor& s, const Tensor&, const Tensor& b) { native::div_(s, b); },
       [](double s, double, double b) { return s / b; }, kFloating},
      {"addcmul_", [](Tensor& s, const Tensor& a, const Tensor& b) { native::addcmul_(s, a, b, 0.5); },
       [](double s, double a, double b) { return s + 0.5 * a * b; }, kFloating},
      {"addcmul_(int)", [](Tensor& s, const Tensor& a, const Tensor& b) { native::addcmul_(s, a, b, 2.0); },
       [](double s, double a, double b) { return s + 2 * a * b; }, {kInt64, kInt32}},
      {"addcdiv_", [](Tensor& s, const Tensor& a, const Tensor& b) { native::addcdiv_(s, a, b, -1.5); },
       [](double s, double a, double b) { return s - 1.5 * a / b; }, kFloating},
      {"lerp_", [](Tensor& s, const Tensor& a, const Tensor&) { native::lerp_(s, a, 0.25); },
       [](double s, double a, double) { return s + 0.25 * (a - s); }, kFloating},
      {"clamp_", [](Tensor& s, const Tensor&, const Tensor&) { native::clamp_(s, -1.0, 1.0); },
       [](double s, double, double) { return std::min(std::max(s, -1.0), 1.0); }, kNumeric},
      {"clamp_(min)", [](Tensor& s, const Tensor&, const Tensor&) { native::clamp_(s, 0.0, std::nullopt); },
       [](double s, double, double) { return std::max(s, 0.0); }, kNumeric},
      {"fill_", [](Tensor& s, const Tensor&, const Tensor&) { native::fill_(s, 2.0); },
       [](double, double, double) { return 2.0; }, kNumeric},
      {"fill_(1)", [](Tensor& s, const Tensor&, const Tensor&) { native::fill_(s, 1.0); },
       [](double, double, double) { return 1.0; }, kAll},
      {"zero_", [](Tensor& s, const Tensor&, const Tensor&) { native::zero_(s); },
       [](double, double, double) { return 0.0; }, kAll},
      {"copy_", [](Tensor& s, const Tensor& a, const Tensor&) { native::copy_(s, a); },
       [](double, double a, double) { return a; }, kAll},
      {"masked_fill_", [](Tensor& s, const Tensor& a, const Tensor&) { native::masked_fill_(s, native::gt(a, 0.0), 4); },
       [](double s, double a, double) { return a > 0 ? 4 : s; }, kNumeric},
  };
  return kCases;
}

TEST(Inplace, EveryOpWritesSelfInPlaceForEveryLayoutAndBumpsTheVersion) {
  uint32_t seed = 9000;
  for (const auto& c : inplace_cases()) {
    for (DType dt : c.dtypes) {
      for (const auto& [ss, os] : std::vector<std::pair<IntList, IntList>>{
               {{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{2, 3, 4}, {3, 1}}, {{3, 4}, {}}, {{}, {}}, {{0, 4}, {4}}}) {
        for (Layout l : ref::all_layouts()) {
          SCOPED_TRACE(trace(c.name, dt, l, ss) + " with " + ref::shape_str(os));
          Tensor self = input(dt, ss, seed++, -3, 3, l);
          Tensor a = input(dt, os, seed++, -3, 3, Layout::kTransposed);
          Tensor b = input(dt, os, seed++, 1, 3);  // nonzero divisor
          Array want = ref::zip3(ref::read(self), ref::read(a), ref::read(b), c.ref);
          const void* data = self.raw_data();
          IntList strides = self.strides();
          uint32_t v0 = self.version();
          c.op(self, a, b);
          EXPECT_EQ(self.raw_data(), data);  // same memory, same geometry
          EXPECT_EQ(self.strides(), strides);
          if (self.numel() > 0) {
            EXPECT_GT(self.version(), v0);
          }
          EXPECT_TRUE(ref::matches(self, want, dt));
        }
      }
    }
  }
}

TEST(Inplace, FloatSelfAcceptsIntegerAndNarrowerOrWiderFloatOperands) {
  // PyTorch: the result type only has to be castable (same or lower category) to self's dtype.
  Tensor s = ref::make(Array({3}, {1, 2, 3}), kFloat32, Layout::kStrided);
  native::add_(s, from_vector<int64_t>({1, 1, 1}));
  EXPECT_TRUE(ref::matches(s, Array({3}, {2, 3, 4}), kFloat32));
  native::mul_(s, from_vector<double>({0.5, 0.5, 0.5}));
  EXPECT_TRUE(ref::matches(s, Array({3}, {1, 1.5, 2}), kFloat32));
  Tensor i32 = from_vector<int32_t>({1, 2});
  native::add_(i32, from_vector<int64_t>({10, 20}));
  EXPECT_TRUE(ref::matches(i32, Array({2}, {11, 22}), kInt32));
  native::add_(i32, from_vector<bool>({true, false}));
  EXPECT_TRUE(ref::matches(i32, Array({2}, {12, 22}), kInt32));
  Tensor d = from_vector<double>({1, 2});
  native::add_(d, scalar_tensor(0.5));
  EXPECT_TRUE(ref::matches(d, Array({2}, {1.5, 2.5}), kFloat64));
}

TEST(Inplace, SqrtAndSelfAliasing) {
  Tensor s = ref::make(Array({2, 2}, {1, 4, 9, 16}), kFloat64, Layout::kTransposed);
  native::sqrt_(s);
  EXPECT_TRUE(ref::matches(s, Array({2, 2}, {1, 2, 3, 4}), kFloat64));
  EXPECT_THAT(error_of<TypeError>([] { Tensor i = zeros({2}, kInt64); native::sqrt_(i); }), HasSubstr("sqrt_"));
  Tensor x = ref::make(Array({3}, {1, 2, 3}), kFloat32);
  native::add_(x, x);
  EXPECT_TRUE(ref::matches(x, Array({3}, {2, 4, 6}), kFloat32));
  native::mul_(x, x);
  EXPECT_TRUE(ref::matches(x, Array({3}, {4, 16, 36}), kFloat32));
}

TEST(Inplace, ShapeMismatchThrowsAndLeavesSelfUnchanged) {
  for (Layout l : ref::all_layouts()) {
    SCOPED_TRACE(ref::layout_name(l));
    Array v = ref::random({3, 4}, 77);
    Tensor self = ref::make(v, kFloat32, l);
    Array before = ref::read(self);
    std::string msg = error_of<ValueError>([&] { native::add_(self, zeros({2, 4})); });
    EXPECT_THAT(msg, AllOf(HasSubstr("add_"), HasSubstr("[2, 4]")));
    // broadcasting that would grow self
    msg = error_of<Error>([&] { native::mul_(self, zeros({2, 3, 4})); });
    EXPECT_THAT(msg, AllOf(HasSubstr("mul_"), HasSubstr("[2, 3, 4]")));
    EXPECT_THROW(native::div_(self, zeros({5})), ValueError);
    EXPECT_THROW(native::addcmul_(self, zeros({3, 4}), zeros({3, 5})), ValueError);
    EXPECT_THROW(native::addcdiv_(self, zeros({2, 4}), ones({3, 4})), ValueError);
    EXPECT_THROW(native::lerp_(self, zeros({4, 3}), 0.5), ValueError);
    EXPECT_THROW(native::copy_(self, zeros({3, 5})), Error);
    EXPECT_EQ(self.version(), 0u);
    EXPECT_TRUE(ref::matches(self, before, kFloat32, {0, 0}));
  }
}

TEST(Inplace, ResultTypeThatCannotBeCastToSelfThrowsTypeError) {
  Tensor i = from_vector<int64_t>({1, 2});
  std::string msg = error_of<TypeError>([&] { native::add_(i, from_vector<float>({0.5f, 0.5f})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("add_"), HasSubstr("float32"), HasSubstr("int64")));
  // A fractional scalar cannot be added into an integer tensor either (it used to be truncated).
  msg = error_of<TypeError>([&] { native::add_(i, 2.5); });
  EXPECT_THAT(msg, AllOf(HasSubstr("add_"), HasSubstr("int64")));
  EXPECT_THROW(native::mul_(i, 0.5), TypeError);
  // Integer division produces floats (and used to divide by zero in integers).
  msg = error_of<TypeError>([&] { native::div_(i, from_vector<int64_t>({0, 0})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("div_"), HasSubstr("int64")));
  Tensor b = from_vector<bool>({true, false});
  EXPECT_THROW(native::add_(b, from_vector<int64_t>({1, 1})), TypeError);
  EXPECT_THROW(native::add_(b, 1.0), TypeError);
  EXPECT_EQ(i.version(), 0u);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(b.version(), 0u);
  // Integral scalars into integer tensors stay allowed.
  native::add_(i, 3.0);
  native::mul_(i, 2.0);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{8, 10}));
}

TEST(Inplace, DeviceMismatchThrowsAndLeavesSelfUnchanged) {
  Tensor self = ref::make(Array::filled({2}, 1.0), kFloat32);  // version 0
  Tensor other = ones({2}, TensorOptions().device("cpu:1"));
  std::string msg = error_of<Error>([&] { native::add_(self, other); });
  EXPECT_THAT(msg, AllOf(HasSubstr("add_"), HasSubstr("cpu:1")));
  EXPECT_THROW(native::addcmul_(self, other, other), Error);
  EXPECT_THROW(native::masked_fill_(self, ones({2}, TensorOptions(kBool).device("cpu:1")), 0), Error);
  EXPECT_EQ(self.version(), 0u);
  EXPECT_TRUE(ref::matches(self, Array::filled({2}, 1), kFloat32));
}

// ---- reductions -------------------------------------------------------------------------------------

const std::vector<IntList> kDimSets = {{}, {0}, {1}, {-1}, {0, 2}, {-1, -3}, {2, 0, 1}};

TEST(Reduce, SumMeanProdAmaxAminOverDimSetsDtypesAndLayouts) {
  uint32_t seed = 20000;
  for (DType dt : kAll) {
    for (Layout l : ref::all_layouts()) {
      for (const IntList& dims : kDimSets) {
        for (bool keepdim : {false, true}) {
          SCOPED_TRACE(trace("reduce", dt, l, {2, 3, 4}) + " dims " + ref::shape_str(dims) +
                       (keepdim ? " keepdim" : ""));
          Tensor x = input(dt, {2, 3, 4}, seed++, -2, 2, l);
          Array rx = ref::read(x);
          DType acc = is_floating_point(dt) ? dt : kInt64;
          EXPECT_TRUE(ref::matches(native::sum(x, dims, keepdim), ref::sum(rx, dims, keepdim), acc));
          EXPECT_TRUE(ref::matches(native::prod(x, dims, keepdim), ref::prod(rx, dims, keepdim), acc));
          EXPECT_TRUE(ref::matches(native::amax(x, dims, keepdim), ref::amax(rx, dims, keepdim), dt));
          EXPECT_TRUE(ref::matches(native::amin(x, dims, keepdim), ref::amin(rx, dims, keepdim), dt));
          if (is_floating_point(dt)) {
            EXPECT_TRUE(ref::matches(native::mean(x, dims, keepdim), ref::mean(rx, dims, keepdim), dt));
            for (int64_t corr : {0, 1}) {
              EXPECT_TRUE(ref::matches(native::var(x, dims, corr, keepdim), ref::var(rx, dims, corr, keepdim), dt));
            }
          }
        }
      }
    }
  }
}

TEST(Reduce, SumWithOutputDtypeAndIntegerAccumulation) {
  Tensor i = input(kInt32, {3, 5}, 3, -100, 100, Layout::kTransposed);
  EXPECT_TRUE(ref::matches(native::sum(i, {1}, false, kFloat64), ref::sum(ref::read(i), {1}), kFloat64));
  Tensor b = ref::make(Array({2, 3}, {1, 1, 0, 1, 0, 0}), kBool);
  EXPECT_TRUE(ref::matches(native::sum(b, {1}), Array({2}, {2, 1}), kInt64));
  EXPECT_TRUE(ref::matches(native::sum(b), Array({}, {3}), kInt64));
  // int32 values whose sum does not fit int32 accumulate in int64
  Tensor big = full({4}, 2147483647.0, kInt32);
  EXPECT_TRUE(ref::matches(native::sum(big), Array({}, {4.0 * 2147483647.0}), kInt64));
}

TEST(Reduce, ZeroDimInputs) {
  Tensor s = scalar_tensor(2.5, kFloat64);
  for (const IntList& dims : {IntList{}, IntList{0}, IntList{-1}}) {
    for (bool keepdim : {false, true}) {
      SCOPED_TRACE(ref::shape_str(dims));
      EXPECT_TRUE(ref::matches(native::sum(s, dims, keepdim), Array({}, {2.5}), kFloat64));
      EXPECT_TRUE(ref::matches(native::mean(s, dims, keepdim), Array({}, {2.5}), kFloat64));
      EXPECT_TRUE(ref::matches(native::amax(s, dims, keepdim), Array({}, {2.5}), kFloat64));
    }
  }
  auto [v, i] = native::max(s, 0);
  EXPECT_EQ(v.dim(), 0);
  EXPECT_DOUBLE_EQ(v.item(), 2.5);
  EXPECT_EQ(i.item<int64_t>(), 0);
  EXPECT_EQ(native::argmin(s, -1).item<int64_t>(), 0);
  EXPECT_THROW(native::sum(s, {1}), IndexError);
}

TEST(Reduce, ZeroElementInputs) {
  Tensor e = zeros({0, 3});
  EXPECT_TRUE(ref::matches(native::sum(e, {0}), Array::filled({3}, 0), kFloat32));
  EXPECT_TRUE(ref::matches(native::sum(e, {1}), Array::filled({0}, 0), kFloat32));
  EXPECT_TRUE(ref::matches(native::sum(e, {0}, true), Array::filled({1, 3}, 0), kFloat32));
  EXPECT_TRUE(ref::matches(native::sum(e), Array({}, {0}), kFloat32));
  EXPECT_TRUE(ref::matches(native::prod(e, {0}), Array::filled({3}, 1), kFloat32));
  EXPECT_TRUE(ref::matches(native::mean(e, {0}), Array::filled({3}, NAN), kFloat32));
  EXPECT_TRUE(ref::matches(native::amax(e, {1}), Array::filled({0}, 0), kFloat32));
  EXPECT_TRUE(ref::matches(native::all(e), Array({}, {1}), kBool));
  EXPECT_TRUE(ref::matches(native::any(e), Array({}, {0}), kBool));
  std::string msg = error_of<IndexError>([&] { native::amax(e, {0}); });
  EXPECT_THAT(msg, AllOf(HasSubstr("amax"), HasSubstr("[0, 3]")));
  msg = error_of<IndexError>([&] { native::max(e, 0); });
  EXPECT_THAT(msg, AllOf(HasSubstr("max"), HasSubstr("[0, 3]")));
  EXPECT_THROW(native::argmin(e, 0), IndexError);
  auto [v, i] = native::max(e, 1);
  EXPECT_EQ(v.sizes(), (IntList{0}));
  EXPECT_EQ(i.sizes(), (IntList{0}));
}

TEST(Reduce, MaxMinWithIndicesAndArgMaxArgMin) {
  uint32_t seed = 30000;
  for (DType dt : kAll) {
    for (Layout l : ref::all_layouts()) {
      for (int64_t dim : {0, 1, 2, -1, -2}) {
        for (bool keepdim : {false, true}) {
          SCOPED_TRACE(trace("max/min", dt, l, {3, 4, 5}) + " dim " + std::to_string(dim) + (keepdim ? " keepdim" : ""));
          // Integer inputs have ties: the first occurrence must win, as in the reference.
          Tensor x = input(dt, {3, 4, 5}, seed++, -2, 2, l);
          Array rx = ref::read(x);
          auto [mv, mi] = ref::arg_reduce(rx, dim, keepdim, true);
          auto [nv, ni] = ref::arg_reduce(rx, dim, keepdim, false);
          auto [v, i] = native::max(x, dim, keepdim);
          EXPECT_TRUE(ref::matches(v, mv, dt));
          EXPECT_TRUE(ref::matches(i, mi, kInt64));
          auto [v2, i2] = native::min(x, dim, keepdim);
          EXPECT_TRUE(ref::matches(v2, nv, dt));
          EXPECT_TRUE(ref::matches(i2, ni, kInt64));
          EXPECT_TRUE(ref::matches(native::argmax(x, dim, keepdim), mi, kInt64));
          EXPECT_TRUE(ref::matches(native::argmin(x, dim, keepdim), ni, kInt64));
        }
      }
    }
  }
}

TEST(Reduce, NanPropagatesThroughMaxAndItsIndexPointsAtTheNan) {
  Tensor x = from_vector<float>({1, NAN, 3, 0, 5, -1}, {2, 3});
  auto [v, i] = native::max(x, 1);
  EXPECT_TRUE(ref::matches(v, Array({2}, {NAN, 5}), kFloat32));
  EXPECT_TRUE(ref::matches(i, Array({2}, {1, 1}), kInt64));
  EXPECT_TRUE(ref::matches(native::amin(x, {1}), Array({2}, {NAN, -1}), kFloat32));
  EXPECT_TRUE(ref::matches(native::amax(x), Array({}, {NAN}), kFloat32));
}

TEST(Reduce, AllAndAny) {
  for (DType dt : kAll) {
    SCOPED_TRACE(dtype_name(dt));
    for (Layout l : ref::all_layouts()) {
      Tensor some = ref::make(Array({2, 3}, {1, 0, 1, 1, 1, 1}), dt, l);
      Tensor every = ref::make(Array({2, 3}, {1, 1, 1, 1, 1, 1}), dt, l);
      Tensor none = ref::make(Array::filled({2, 3}, 0), dt, l);
      EXPECT_TRUE(ref::matches(native::all(some), Array({}, {0}), kBool));
      EXPECT_TRUE(ref::matches(native::any(some), Array({}, {1}), kBool));
      EXPECT_TRUE(ref::matches(native::all(every), Array({}, {1}), kBool));
      EXPECT_TRUE(ref::matches(native::any(none), Array({}, {0}), kBool));
    }
  }
  EXPECT_TRUE(native::all(from_vector<float>({0.5f, -2.f})).item<bool>());
  EXPECT_TRUE(native::any(from_vector<float>({0.f, NAN})).item<bool>());
}

TEST(Reduce, SumToSizeReversesBroadcasting) {
  Array v = ref::random({2, 3, 4}, 55);
  for (Layout l : ref::all_layouts()) {
    SCOPED_TRACE(ref::layout_name(l));
    Tensor x = ref::make(v, kFloat64, l);
    EXPECT_TRUE(ref::matches(native::sum_to_size(x, {3, 1}), Array({3, 1}, ref::sum(v, {0, 2}).v), kFloat64));
    EXPECT_TRUE(ref::matches(native::sum_to_size(x, {4}), ref::sum(v, {0, 1}), kFloat64));
    EXPECT_TRUE(ref::matches(native::sum_to_size(x, {1, 3, 1}), ref::sum(v, {0, 2}, true), kFloat64));
    EXPECT_TRUE(ref::matches(native::sum_to_size(x, {}), ref::sum(v), kFloat64));
    EXPECT_TRUE(native::sum_to_size(x, {2, 3, 4}).is_same(x));
  }
  std::string msg = error_of<ValueError>([] { native::sum_to_size(zeros({2, 3}), {2, 1, 3}); });
  EXPECT_THAT(msg, AllOf(HasSubstr("sum_to_size"), HasSubstr("[2, 1, 3]")));
  EXPECT_THROW(native::sum_to_size(zeros({2, 3}), {2}), ValueError);
}

TEST(Reduce, BadDimsAndDtypesThrowNamingTheOp) {
  Tensor x = zeros({2, 3, 4});
  std::string msg = error_of<IndexError>([&] { native::sum(x, {3}); });
  EXPECT_THAT(msg, AllOf(HasSubstr("sum"), HasSubstr("got 3")));
  EXPECT_THAT(error_of<IndexError>([&] { native::amax(x, {-4}); }), HasSubstr("got -4"));
  msg = error_of<ValueError>([&] { native::sum(x, {1, -2}); });
  EXPECT_THAT(msg, AllOf(HasSubstr("sum"), HasSubstr("multiple times")));
  EXPECT_THAT(error_of<IndexError>([&] { native::max(x, 5); }), HasSubstr("max"));
  EXPECT_THAT(error_of<IndexError>([&] { native::argmax(x, -4); }), HasSubstr("argmax"));
  msg = error_of<TypeError>([] { native::mean(zeros({2}, kInt64)); });
  EXPECT_THAT(msg, AllOf(HasSubstr("mean"), HasSubstr("int64")));
  EXPECT_THAT(error_of<TypeError>([] { native::var(zeros({2}, kInt32)); }), HasSubstr("var"));
  EXPECT_EQ(native::sum(native::to(ones({2}), kBFloat16)).dtype(), kBFloat16);  // Note [16-bit floats on CPU]
}

// ---- matrix products ---------------------------------------------------------------------------------

TEST(Linalg, MmMatchesTheTripleLoopForEveryOperandLayout) {
  const std::vector<std::array<int64_t, 3>> shapes = {{3, 4, 5}, {1, 7, 1}, {5, 1, 3}, {4, 6, 1}, {0, 3, 4},
                                                      {3, 0, 4}, {2, 3, 0}, {17, 33, 9}};
  uint32_t seed = 40000;
  for (DType dt : kNumeric) {
    for (auto [n, k, m] : shapes) {
      for (Layout la : ref::all_layouts()) {
        for (Layout lb : ref::all_layouts()) {
          SCOPED_TRACE(trace("mm", dt, la, {n, k}) + " x " + ref::shape_str({k, m}) + " " + ref::layout_name(lb));
          Tensor a = input(dt, {n, k}, seed++, -3, 3, la), b = input(dt, {k, m}, seed++, -3, 3, lb);
          Array want = ref::mm(ref::read(a), ref::read(b));
          Tensor y = native::mm(a, b);
          EXPECT_TRUE(ref::matches(y, want, dt));
          EXPECT_TRUE(ref::matches(native::matmul(a, b), want, dt));
        }
      }
    }
  }
}

TEST(Linalg, MmWithRealTransposedViews) {
  Array av = ref::random({4, 3}, 1), bv = ref::random({5, 4}, 2);
  for (DType dt : kFloating) {
    Tensor a = native::t(ref::make(av, dt)), b = native::t(ref::make(bv, dt));  // [3,4], [4,5]
    Array ra = ref::read(a), rb = ref::read(b);
    EXPECT_TRUE(ref::matches(native::mm(a, b), ref::mm(ra, rb), dt));
    EXPECT_TRUE(ref::matches(native::mm(native::t(b), native::t(a)), ref::mm(ref::read(native::t(b)), ref::read(native::t(a))), dt));
    // a row slice with a step (leading stride 2*cols)
    Tensor rows = native::slice(ref::make(ref::random({6, 4}, 3), dt), 0, 0, 6, 2);
    EXPECT_TRUE(ref::matches(native::mm(rows, b), ref::mm(ref::read(rows), rb), dt));
    // an expanded (stride 0) operand
    Tensor ex = native::expand(ref::make(ref::random({1, 4}, 4), dt), {3, 4});
    EXPECT_TRUE(ref::matches(native::mm(ex, b), ref::mm(ref::read(ex), rb), dt));
  }
}

TEST(Linalg, BmmWithPermutedBatches) {
  uint32_t seed = 41000;
  for (DType dt : kNumeric) {
    for (Layout la : ref::all_layouts()) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + ref::layout_name(la));
      Tensor a = input(dt, {3, 2, 4}, seed++, -3, 3, la), b = input(dt, {3, 4, 5}, seed++, -3, 3, Layout::kTransposed);
      Array ra = ref::read(a), rb = ref::read(b);
      EXPECT_TRUE(ref::matches(native::bmm(a, b), ref::matmul(ra, rb), dt));
      Tensor p = native::permute(input(dt, {4, 3, 5}, seed++), {1, 0, 2});  // [3,4,5], batch not outermost
      EXPECT_TRUE(ref::matches(native::bmm(a, p), ref::matmul(ra, ref::read(p)), dt));
    }
  }
  EXPECT_EQ(native::bmm(zeros({0, 2, 3}), zeros({0, 3, 4})).sizes(), (IntList{0, 2, 4}));
}

TEST(Linalg, MatmulShapeCases) {
  const std::vector<std::pair<IntList, IntList>> cases = {
      {{4}, {4}},             // 1D.1D -> 0-dim
      {{3, 4}, {4}},          // 2D.1D
      {{4}, {4, 5}},          // 1D.2D
      {{3, 4}, {4, 5}},       // 2D.2D
      {{2, 3, 4}, {4, 5}},    // 3D.2D
      {{2, 3, 4}, {4}},       // 3D.1D
      {{4}, {2, 4, 5}},       // 1D.3D
      {{3, 4}, {2, 4, 5}},    // 2D.3D
      {{2, 3, 4}, {2, 4, 5}}, // 3D.3D
      {{1, 3, 4}, {2, 4, 5}}, // batch broadcast
      {{2, 1, 3, 4}, {5, 4, 2}},  // 4D.3D broadcast -> [2, 5, 3, 2]
      {{0, 3, 4}, {4, 2}},
  };
  uint32_t seed = 42000;
  for (DType dt : {kFloat32, kFloat64, kInt64}) {
    for (const auto& [sa, sb] : cases) {
      for (Layout l : {Layout::kContiguous, Layout::kTransposed, Layout::kStrided}) {
        SCOPED_TRACE(trace("matmul", dt, l, sa) + " @ " + ref::shape_str(sb));
        Tensor a = input(dt, sa, seed++, -3, 3, l), b = input(dt, sb, seed++, -3, 3, Layout::kNarrowed);
        Array want = ref::matmul(ref::read(a), ref::read(b));
        EXPECT_TRUE(ref::matches(native::matmul(a, b), want, dt));
      }
    }
  }
  EXPECT_EQ(native::matmul(zeros({2, 1, 3, 4}), zeros({5, 4, 2})).sizes(), (IntList{2, 5, 3, 2}));
  EXPECT_EQ(native::matmul(zeros({4}), zeros({4})).dim(), 0);
}

TEST(Linalg, AddmmBroadcastsBiasAndAppliesBetaAlpha) {
  uint32_t seed = 43000;
  for (DType dt : kFloating) {
    for (const IntList& bias_shape : {IntList{5}, IntList{3, 5}, IntList{1, 5}, IntList{3, 1}, IntList{}}) {
      for (auto [beta, alpha] : std::vector<std::pair<double, double>>{{1, 1}, {0.5, 2}, {-1, 0.25}}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " bias " + ref::shape_str(bias_shape) + " beta " +
                     std::to_string(beta) + " alpha " + std::to_string(alpha));
        Tensor bias = input(dt, bias_shape, seed++);
        Tensor a = input(dt, {3, 4}, seed++, -3, 3, Layout::kTransposed), b = input(dt, {4, 5}, seed++, -3, 3, Layout::kStrided);
        Array prodm = ref::mm(ref::read(a), ref::read(b));
        Array want = ref::zip(ref::read(bias), prodm, [=](double c, double p) { return beta * c + alpha * p; });
        EXPECT_TRUE(ref::matches(native::addmm(bias, a, b, beta, alpha), want, dt));
      }
    }
  }
}

TEST(Linalg, AddmmWithBetaZeroIgnoresNanBiasAndEmptyK) {
  Tensor bias = full({2, 2}, NAN);
  Tensor a = from_vector<float>({1, 2, 3, 4}, {2, 2}), b = from_vector<float>({1, 0, 0, 1}, {2, 2});
  EXPECT_TRUE(ref::matches(native::addmm(bias, a, b, 0.0, 1.0), Array({2, 2}, {1, 2, 3, 4}), kFloat32));
  // k == 0: the product is all zeros, so the result is beta * bias
  Tensor r = native::addmm(from_vector<float>({1, 2}), zeros({3, 0}), zeros({0, 2}), 3.0, 1.0);
  EXPECT_TRUE(ref::matches(r, Array({3, 2}, {3, 6, 3, 6, 3, 6}), kFloat32));
  EXPECT_TRUE(ref::matches(native::mm(zeros({2, 0}), zeros({0, 3})), Array::filled({2, 3}, 0), kFloat32));
}

TEST(Linalg, AddmmOutWritesIntoOutAndBumpsItsVersion) {
  Tensor out = ref::make(Array::filled({2, 3}, 1.0), kFloat64);  // version 0
  Tensor a = ref::make(ref::random({2, 4}, 9), kFloat64, Layout::kTransposed);
  Tensor b = ref::make(ref::random({4, 3}, 10), kFloat64);
  Array want = ref::zip(ref::read(out), ref::mm(ref::read(a), ref::read(b)), [](double c, double p) { return 2 * c + 0.5 * p; });
  const void* data = out.raw_data();
  native::addmm_out(out, a, b, 2.0, 0.5);
  EXPECT_EQ(out.raw_data(), data);
  EXPECT_EQ(out.version(), 1u);
  EXPECT_TRUE(ref::matches(out, want, kFloat64));
  Tensor bad = zeros({3, 3}, kFloat64);
  std::string msg = error_of<ValueError>([&] { native::addmm_out(bad, a, b, 1.0, 1.0); });
  EXPECT_THAT(msg, AllOf(HasSubstr("addmm_out"), HasSubstr("[3, 3]")));
  EXPECT_EQ(bad.version(), 0u);
}

TEST(Linalg, BadShapesDtypesAndDevicesThrowNamingTheOp) {
  std::string msg = error_of<ValueError>([] { native::mm(zeros({3, 4}), zeros({5, 6})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("mm"), HasSubstr("3x4 and 5x6")));
  msg = error_of<ValueError>([] { native::mm(zeros({2, 3, 4}), zeros({4, 2})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("mm"), HasSubstr("[2, 3, 4]")));
  msg = error_of<TypeError>([] { native::mm(zeros({2, 2}), zeros({2, 2}, kFloat64)); });
  EXPECT_THAT(msg, AllOf(HasSubstr("mm"), HasSubstr("float32"), HasSubstr("float64")));
  msg = error_of<Error>([] { native::mm(zeros({2, 2}), zeros({2, 2}, TensorOptions().device("cpu:1"))); });
  EXPECT_THAT(msg, AllOf(HasSubstr("mm"), HasSubstr("cpu:1")));
  msg = error_of<ValueError>([] { native::bmm(zeros({2, 3, 4}), zeros({3, 4, 5})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("bmm"), HasSubstr("[3, 4, 5]")));
  EXPECT_THAT(error_of<ValueError>([] { native::bmm(zeros({3, 4}), zeros({4, 5})); }), HasSubstr("bmm"));
  msg = error_of<ValueError>([] { native::matmul(scalar_tensor(1), zeros({2})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("matmul"), HasSubstr("0D")));
  msg = error_of<ValueError>([] { native::matmul(zeros({3}), zeros({4})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("matmul"), HasSubstr("[3]")));
  msg = error_of<ValueError>([] { native::matmul(zeros({2, 3, 4}), zeros({2, 5, 6})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("matmul"), HasSubstr("[2, 5, 6]")));
  EXPECT_THROW(native::matmul(zeros({2, 3, 4}), zeros({3, 4, 5})), ValueError);  // batch 2 vs 3
  msg = error_of<ValueError>([] { native::addmm(zeros({2}), zeros({2, 3}), zeros({4, 2})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("addmm"), HasSubstr("[4, 2]")));
  EXPECT_THAT(error_of<TypeError>([] { native::mm(zeros({2, 2}, kBool), zeros({2, 2}, kBool)); }), HasSubstr("bool"));
}

// ---- indexing ------------------------------------------------------------------------------------------

TEST(Index, IndexSelectOverDimsDtypesLayoutsAndIndexTypes) {
  uint32_t seed = 50000;
  const std::vector<int64_t> idx = {2, 0, 2, 3};
  for (DType dt : kAll) {
    for (Layout l : ref::all_layouts()) {
      for (int64_t dim : {0, 1, 2, -1}) {
        for (DType it : {kInt64, kInt32}) {
          SCOPED_TRACE(trace("index_select", dt, l, {4, 5, 4}) + " dim " + std::to_string(dim) + " " + dtype_name(it));
          Tensor x = input(dt, {4, 5, 4}, seed++, -3, 3, l);
          Tensor index = ref::make(Array({4}, {2, 0, 2, 3}), it, Layout::kStrided);
          int64_t d = dim < 0 ? dim + 3 : dim;
          EXPECT_TRUE(ref::matches(native::index_select(x, dim, index), ref::index_select(ref::read(x), d, idx), dt));
        }
      }
    }
  }
  Tensor x = input(kFloat32, {3, 2}, 1);
  EXPECT_EQ(native::index_select(x, 0, zeros({0}, kInt64)).sizes(), (IntList{0, 2}));
  Tensor s = native::index_select(x, 1, scalar_tensor(1, kInt64));  // a 0-dim index selects one
  EXPECT_TRUE(ref::matches(s, ref::index_select(ref::read(x), 1, {1}), kFloat32));
}

TEST(Index, IndexSelectErrors) {
  Tensor x = zeros({3, 4});
  std::string msg = error_of<IndexError>([&] { native::index_select(x, 0, from_vector<int64_t>({0, 3})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("index_select"), HasSubstr("index 3"), HasSubstr("size 3")));
  msg = error_of<TypeError>([&] { native::index_select(x, 0, from_vector<float>({0.f})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("index_select"), HasSubstr("float32")));
  EXPECT_THAT(error_of<IndexError>([&] { native::index_select(x, 0, zeros({1, 1}, kInt64)); }),
              HasSubstr("index_select"));
  EXPECT_THAT(error_of<IndexError>([&] { native::index_select(x, 2, zeros({1}, kInt64)); }),
              HasSubstr("index_select"));
  msg = error_of<Error>([&] { native::index_select(x, 0, zeros({1}, TensorOptions(kInt64).device("cpu:1"))); });
  EXPECT_THAT(msg, AllOf(HasSubstr("index_select"), HasSubstr("cpu:1")));
}

TEST(Index, GatherMatchesTheReference) {
  uint32_t seed = 51000;
  for (DType dt : kAll) {
    for (Layout l : ref::all_layouts()) {
      for (int64_t dim : {0, 1, 2, -1}) {
        SCOPED_TRACE(trace("gather", dt, l, {3, 4, 5}) + " dim " + std::to_string(dim));
        int64_t d = dim < 0 ? dim + 3 : dim;
        Tensor x = input(dt, {3, 4, 5}, seed++, -3, 3, l);
        IntList is = {2, 3, 4};
        is[d] = 6;  // the gathered dim may be longer than the input's
        Tensor index = input(kInt64, is, seed++, 0, IntList{3, 4, 5}[d] - 1, Layout::kTransposed);
        EXPECT_TRUE(ref::matches(native::gather(x, dim, index), ref::gather(ref::read(x), d, ref::read(index)), dt));
      }
    }
  }
  std::string msg = error_of<IndexError>([] { native::gather(zeros({3, 4}), 1, from_vector<int64_t>({0, 7}, {1, 2})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("gather"), HasSubstr("index 7"), HasSubstr("size 4")));
  EXPECT_THAT(error_of<ValueError>([] { native::gather(zeros({3, 4}), 1, zeros({2}, kInt64)); }), HasSubstr("gather"));
  EXPECT_THAT(error_of<ValueError>([] { native::gather(zeros({3, 4}), 1, zeros({4, 1}, kInt64)); }),
              HasSubstr("gather"));
  EXPECT_THROW(native::gather(zeros({3, 4}), 1, zeros({1, 1})), TypeError);
}

TEST(Index, ScatterAddAccumulatesDuplicates) {
  uint32_t seed = 52000;
  for (DType dt : kNumeric) {
    for (Layout l : ref::all_layouts()) {
      for (int64_t dim : {0, 1, -1}) {
        SCOPED_TRACE(trace("scatter_add", dt, l, {4, 5}) + " dim " + std::to_string(dim));
        int64_t d = dim < 0 ? dim + 2 : dim;
        Tensor self = input(dt, {4, 5}, seed++, -3, 3, l);
        Tensor src = input(dt, {3, 6}, seed++, -3, 3, Layout::kTransposed);
        IntList is = {3, 4};
        Tensor index = input(kInt64, is, seed++, 0, IntList{4, 5}[d] - 1, Layout::kStrided);
        Array want = ref::scatter_add(ref::read(self), d, ref::read(index), ref::read(src));
        EXPECT_TRUE(ref::matches(native::scatter_add(self, dim, index, src), want, dt));
        uint32_t v0 = self.version();
        native::scatter_add_(self, dim, index, src);
        EXPECT_EQ(self.version(), v0 + 1);
        EXPECT_TRUE(ref::matches(self, want, dt));
      }
    }
  }
}

TEST(Index, ScatterAddBadIndexThrowsAndLeavesSelfUnchanged) {
  Tensor self = ref::make(Array::filled({3, 3}, 1.0), kFloat32);  // version 0
  Tensor src = ones({2, 3});
  Tensor index = from_vector<int64_t>({0, 1, 2, 0, 1, 3}, {2, 3});  // the last one is out of range
  std::string msg = error_of<IndexError>([&] { native::scatter_add_(self, 0, index, src); });
  EXPECT_THAT(msg, AllOf(HasSubstr("scatter_add_"), HasSubstr("index 3")));
  EXPECT_EQ(self.version(), 0u);
  EXPECT_TRUE(ref::matches(self, Array::filled({3, 3}, 1.0), kFloat32));
  EXPECT_THROW(native::scatter_add_(self, 0, from_vector<int64_t>({0, 1, 2}, {1, 3}), ones({1, 3}, kFloat64)), TypeError);
  EXPECT_THROW(native::scatter_add_(self, 1, zeros({4, 3}, kInt64), ones({4, 3})), ValueError);  // 4 rows > 3
  EXPECT_THROW(native::scatter_add_(self, 2, zeros({1, 3}, kInt64), ones({1, 3})), IndexError);
  EXPECT_TRUE(ref::matches(self, Array::filled({3, 3}, 1.0), kFloat32));
}

TEST(Index, IndexAddAccumulatesDuplicatesIntoNonContiguousSelf) {
  uint32_t seed = 53000;
  const std::vector<int64_t> idx = {1, 0, 1, 3, 1};
  for (DType dt : kNumeric) {
    for (Layout l : ref::all_layouts()) {
      for (int64_t dim : {0, 1, -1}) {
        SCOPED_TRACE(trace("index_add_", dt, l, {4, 4}) + " dim " + std::to_string(dim));
        int64_t d = dim < 0 ? dim + 2 : dim;
        Tensor self = input(dt, {4, 4}, seed++, -3, 3, l);
        IntList ss = {4, 4};
        ss[d] = 5;
        Tensor src = input(dt, ss, seed++, -3, 3, Layout::kTransposed);
        Array want = ref::index_add(ref::read(self), d, idx, ref::read(src));
        uint32_t v0 = self.version();
        native::index_add_(self, dim, from_vector<int64_t>(idx), src);
        EXPECT_GT(self.version(), v0);
        EXPECT_TRUE(ref::matches(self, want, dt));
      }
    }
  }
}

TEST(Index, IndexAddErrorsLeaveSelfUnchanged) {
  Tensor self = ref::make(Array::filled({3, 2}, 1.0), kFloat32);  // version 0
  std::string msg = error_of<IndexError>([&] { native::index_add_(self, 0, from_vector<int64_t>({0, 5}), ones({2, 2})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("index_add_"), HasSubstr("index 5")));
  msg = error_of<ValueError>([&] { native::index_add_(self, 0, from_vector<int64_t>({0, 1}), ones({2, 3})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("index_add_"), HasSubstr("[2, 3]")));
  EXPECT_THROW(native::index_add_(self, 0, from_vector<int64_t>({0}, {1}), ones({1, 2}, kFloat64)), TypeError);
  EXPECT_EQ(self.version(), 0u);
  EXPECT_TRUE(ref::matches(self, Array::filled({3, 2}, 1.0), kFloat32));
}

TEST(Index, IndexAddIntoZeroDimSelf) {
  // Regression: index_add_ read self.sizes()[0] of a 0-dim tensor (out of bounds; crashed).
  // A 0-dim self acts as a 1-element vector, as in PyTorch.
  Tensor self = ref::make(Array({}, {1.0}), kFloat32);
  native::index_add_(self, 0, from_vector<int64_t>({0, 0}, {2}), from_vector<float>({2, 3}, {2}));
  EXPECT_EQ(self.dim(), 0);
  EXPECT_DOUBLE_EQ(self.item(), 6.0);
  EXPECT_GT(self.version(), 0u);
  native::index_add_(self, -1, from_vector<int64_t>({0}, {1}), scalar_tensor(0.5));
  EXPECT_DOUBLE_EQ(self.item(), 6.5);
  std::string msg = error_of<IndexError>([&] { native::index_add_(self, 0, from_vector<int64_t>({1}, {1}), ones({1})); });
  EXPECT_THAT(msg, AllOf(HasSubstr("index_add_"), HasSubstr("index 1")));
  EXPECT_THROW(native::index_add_(self, 1, from_vector<int64_t>({0}, {1}), ones({1})), IndexError);
  EXPECT_DOUBLE_EQ(self.item(), 6.5);
}

TEST(Index, OneHot) {
  Tensor idx = ref::make(Array({2, 3}, {0, 2, 1, 3, 3, 0}), kInt64, Layout::kTransposed);
  Array ri = ref::read(idx);
  for (int64_t classes : {4, 6, -1}) {
    SCOPED_TRACE(classes);
    int64_t n = classes < 0 ? 4 : classes;
    Array want = Array::filled({2, 3, n}, 0);
    ref::for_each_index({2, 3}, [&](const IntList& i) { want.at({i[0], i[1], static_cast<int64_t>(ri.at(i))}) = 1; });
    EXPECT_TRUE(ref::matches(native::one_hot(idx, classes), want, kInt64));
  }
  std::string msg = error_of<IndexError>([&] { native::one_hot(idx, 3); });
  EXPECT_THAT(msg, AllOf(HasSubstr("one_hot"), HasSubstr("got 3")));
  EXPECT_THROW(native::one_hot(from_vector<int64_t>({-1}, {1}), 3), IndexError);
  EXPECT_THAT(error_of<TypeError>([] { native::one_hot(zeros({2}, kInt32), 3); }), HasSubstr("int32"));
}

// ---- softmax --------------------------------------------------------------------------------------------

TEST(Softmax, SoftmaxAndLogSoftmaxMatchTheReference) {
  uint32_t seed = 60000;
  for (DType dt : kFloating) {
    for (Layout l : ref::all_layouts()) {
      for (int64_t dim : {0, 1, 2, -1}) {
        SCOPED_TRACE(trace("softmax", dt, l, {3, 4, 5}) + " dim " + std::to_string(dim));
        Tensor x = input(dt, {3, 4, 5}, seed++, -5, 5, l);
        Array rx = ref::read(x);
        EXPECT_TRUE(ref::matches(native::softmax(x, dim), ref::softmax(rx, dim, false), dt));
        EXPECT_TRUE(ref::matches(native::log_softmax(x, dim), ref::softmax(rx, dim, true), dt));
        // rows sum to one
        Array sums = ref::sum(ref::read(native::softmax(x, dim)), {dim});
        EXPECT_TRUE(ref::all_close(sums, Array::filled(sums.shape, 1.0), ref::tol_for(dt)));
      }
    }
  }
}

TEST(Softmax, StableForLargeValues) {
  for (DType dt : kFloating) {
    SCOPED_TRACE(dtype_name(dt));
    Array v({2, 3}, {1000, 1001, 1002, -1000, -1000.5, -999});
    Tensor x = ref::make(v, dt);
    Tensor s = native::softmax(x, 1), ls = native::log_softmax(x, 1);
    EXPECT_TRUE(ref::matches(s, ref::softmax(v, 1, false), dt));
    EXPECT_TRUE(ref::matches(ls, ref::softmax(v, 1, true), dt));
    for (double y : ref::read(s).v) EXPECT_TRUE(std::isfinite(y));
    for (double y : ref::read(ls).v) EXPECT_TRUE(std::isfinite(y));
  }
  const double inf = std::numeric_limits<double>::infinity();
  Tensor m = from_vector<float>({-INFINITY, 0, 0, -INFINITY, -INFINITY, 1}, {2, 3});
  EXPECT_TRUE(ref::matches(native::softmax(m, 1), Array({2, 3}, {0, 0.5, 0.5, 0, 0, 1}), kFloat32));
  EXPECT_TRUE(ref::matches(native::log_softmax(m, 1), Array({2, 3}, {-inf, -std::log(2.0), -std::log(2.0), -inf, -inf, 0}),
                           kFloat32));
}

TEST(Softmax, ZeroDimIntegerAndEmptyInputs) {
  EXPECT_TRUE(ref::matches(native::softmax(scalar_tensor(3.0), 0), Array({}, {1}), kFloat32));
  EXPECT_TRUE(ref::matches(native::log_softmax(scalar_tensor(3.0), -1), Array({}, {0}), kFloat32));
  Tensor i = from_vector<int64_t>({1, 2, 3});
  EXPECT_TRUE(ref::matches(native::softmax(i, 0), ref::softmax(Array({3}, {1, 2, 3}), 0, false), kFloat32));
  EXPECT_EQ(native::softmax(zeros({0, 3}), 1).sizes(), (IntList{0, 3}));
  EXPECT_EQ(native::softmax(zeros({2, 0}), 1).sizes(), (IntList{2, 0}));
  std::string msg = error_of<IndexError>([] { native::softmax(zeros({2, 3}), 2); });
  EXPECT_THAT(msg, AllOf(HasSubstr("softmax"), HasSubstr("got 2")));
  EXPECT_THAT(error_of<IndexError>([] { native::log_softmax(zeros({2, 3}), -3); }), HasSubstr("log_softmax"));
}

TEST(Softmax, BackwardFormulasMatchTheReference) {
  for (int64_t dim : {0, 1, -1}) {
    SCOPED_TRACE(dim);
    Tensor x = input(kFloat64, {3, 4}, 70 + static_cast<uint32_t>(dim + 1), -2, 2);
    Tensor g = input(kFloat64, {3, 4}, 80 + static_cast<uint32_t>(dim + 1), -2, 2, Layout::kTransposed);
    Array rg = ref::read(g);
    int64_t d = dim < 0 ? dim + 2 : dim;
    Tensor y = native::softmax(x, dim);
    Array ry = ref::read(y);
    Array gy = ref::sum(ref::zip(rg, ry, [](double a, double b) { return a * b; }), {d}, true);
    Array want = ref::zip3(rg, ry, gy, [](double gg, double yy, double s) { return yy * (gg - s); });
    EXPECT_TRUE(ref::matches(native::softmax_backward(g, y, dim), want, kFloat64));
    Tensor ly = native::log_softmax(x, dim);
    Array rly = ref::read(ly);
    Array gs = ref::sum(rg, {d}, true);
    Array want2 = ref::zip3(rg, rly, gs, [](double gg, double yy, double s) { return gg - std::exp(yy) * s; });
    EXPECT_TRUE(ref::matches(native::log_softmax_backward(g, ly, dim), want2, kFloat64));
  }
  EXPECT_THROW(native::softmax_backward(zeros({2, 3}), zeros({3, 2}), 0), ValueError);
}

// ---- expanded (stride-0) inputs to every kind of op ----------------------------------------------------

TEST(Expanded, StrideZeroInputsGiveTheSameResultsAsTheirMaterializedCopies) {
  Tensor base = ref::make(ref::as_dtype(ref::random({3, 1, 4}, 91), kFloat32), kFloat32);
  Tensor e = native::expand(base, {2, 3, 5, 4});
  Tensor m = native::contiguous(e);
  ASSERT_FALSE(m.storage().is_same(e.storage()));
  Array re = ref::read(e);
  auto same = [&](const Tensor& got, const Tensor& want) {
    return ref::matches(got, ref::read(want), want.dtype());
  };
  EXPECT_TRUE(same(native::exp(e), native::exp(m)));
  EXPECT_TRUE(same(native::mul(e, e), native::mul(m, m)));
  EXPECT_TRUE(same(native::sum(e, {1, 2}), native::sum(m, {1, 2})));
  EXPECT_TRUE(ref::matches(native::sum(e, {0, 2}, true), ref::sum(re, {0, 2}, true), kFloat32));
  EXPECT_TRUE(ref::matches(native::amax(e, {-1}), ref::amax(re, {-1}), kFloat32));
  EXPECT_TRUE(ref::matches(native::argmax(e, 3), ref::arg_reduce(re, 3, false, true).second, kInt64));
  EXPECT_TRUE(ref::matches(native::softmax(e, 2), ref::softmax(re, 2, false), kFloat32));
  EXPECT_TRUE(same(native::index_select(e, 2, from_vector<int64_t>({4, 0})), native::index_select(m, 2, from_vector<int64_t>({4, 0}))));
  EXPECT_TRUE(same(native::cat({e, m}, 1), native::cat({m, m}, 1)));
  Tensor gi = native::expand(from_vector<int64_t>({3, 1}, {1, 1, 1, 2}), {2, 3, 5, 2});
  EXPECT_TRUE(ref::matches(native::gather(e, 3, gi), ref::gather(re, 3, ref::read(gi)), kFloat32));
  Tensor w = native::expand(ref::make(ref::random({4, 1}, 92), kFloat32), {4, 6});
  EXPECT_TRUE(ref::matches(native::matmul(e, w), ref::matmul(re, ref::read(w)), kFloat32));
  EXPECT_TRUE(ref::matches(native::to(e, kFloat64), re, kFloat64, {0, 0}));
}

// ---- the thread-pool path ---------------------------------------------------------------------------------

// Restores the thread count a test changed.
struct ScopedNumThreads {
  int saved;
  explicit ScopedNumThreads(int n) : saved(get_num_threads()) { set_num_threads(n); }
  ~ScopedNumThreads() { set_num_threads(saved); }
};

TEST(Parallel, LargeTensorsOnTwoThreadsMatchTheReference) {
  ScopedNumThreads threads(2);
  ASSERT_EQ(get_num_threads(), 2);
  const int64_t n = 1024;  // 1 << 20 elements
  Array av = ref::random({n, n}, 1), bv = ref::random({n, n}, 2);
  Tensor a = ref::make(av, kFloat32), b = ref::make(bv, kFloat32, Layout::kTransposed);
  Array ra = ref::read(a), rb = ref::read(b);
  auto add = [](double x, double y) { return x + y; };
  EXPECT_TRUE(ref::matches(native::add(a, b), ref::zip(ra, rb, add), kFloat32));          // rows in parallel
  EXPECT_TRUE(ref::matches(native::mul(a, 0.5), ref::map(ra, [](double x) { return x * 0.5; }), kFloat32));
  Tensor flat_a = native::reshape(a, {n * n}), flat_c = native::reshape(native::contiguous(b), {n * n});
  EXPECT_TRUE(ref::matches(native::add(flat_a, flat_c), Array({n * n}, ref::zip(ra, rb, add).v), kFloat32));  // one long row split
  EXPECT_TRUE(ref::matches(native::exp(b), ref::map(rb, [](double x) { return std::exp(x); }), kFloat32));
  // Reductions: leading-dim fast path, strided inner path, and the whole tensor.
  ref::Tol sum_tol{1e-4, 1e-3};
  EXPECT_TRUE(ref::matches(native::sum(a, {0}), ref::sum(ra, {0}), kFloat32, sum_tol));
  EXPECT_TRUE(ref::matches(native::sum(a, {1}), ref::sum(ra, {1}), kFloat32, sum_tol));
  EXPECT_TRUE(ref::matches(native::sum(b, {0}), ref::sum(rb, {0}), kFloat32, sum_tol));
  EXPECT_TRUE(ref::matches(native::sum(a), ref::sum(ra), kFloat32, {1e-4, 1e-2}));
  EXPECT_TRUE(ref::matches(native::amax(b, {1}), ref::amax(rb, {1}), kFloat32));
  EXPECT_TRUE(ref::matches(native::argmax(a, 1), ref::arg_reduce(ra, 1, false, true).second, kInt64));
  EXPECT_TRUE(ref::matches(native::softmax(b, -1), ref::softmax(rb, -1, false), kFloat32));
  EXPECT_TRUE(ref::matches(native::to(b, kFloat64), rb, kFloat64, {0, 0}));
  // index_select of many rows
  Tensor rows = native::to(native::div(arange(n), 2.0), kInt64);  // 0,0,1,1,...
  std::vector<int64_t> ri;
  for (int64_t i = 0; i < n; ++i) ri.push_back(i / 2);
  EXPECT_TRUE(ref::matches(native::index_select(a, 0, rows), ref::index_select(ra, 0, ri), kFloat32, {0, 0}));
  // Broadcast row operand and a mask over the parallel row loop.
  Tensor row = ref::make(ref::random({n}, 5), kFloat32);
  Array rrow = ref::read(row);
  EXPECT_TRUE(ref::matches(native::sub(b, row), ref::zip(rb, rrow, [](double x, double y) { return x - y; }), kFloat32));
  Tensor mask = native::gt(a, 0.0);
  EXPECT_TRUE(ref::matches(native::masked_fill(b, mask, -1.0),
                           ref::zip(rb, ra, [](double x, double m) { return m > 0 ? -1.0 : x; }), kFloat32));
  // One long strided row (every other element of 2^21): the split-row path with non-unit strides.
  Tensor wide = ref::make(ref::random({2 * n * n}, 6), kFloat32);
  Tensor every_other = native::slice(wide, 0, 1, 2 * n * n, 2);
  Array reo = ref::read(every_other);
  EXPECT_TRUE(ref::matches(native::mul(every_other, every_other), ref::zip(reo, reo, [](double x, double y) { return x * y; }),
                           kFloat32));
  // Several reduced dims of a non-contiguous 3-D tensor, in parallel over the outputs.
  Tensor c3 = ref::make(ref::random({64, 128, 128}, 7), kFloat32, Layout::kTransposed);
  Array r3 = ref::read(c3);
  EXPECT_TRUE(ref::matches(native::sum(c3, {0, 2}, true), ref::sum(r3, {0, 2}, true), kFloat32, sum_tol));
  EXPECT_TRUE(ref::matches(native::amin(c3, {1}), ref::amin(r3, {1}), kFloat32));
  auto [mv, mi] = native::max(c3, 0);
  EXPECT_TRUE(ref::matches(mi, ref::arg_reduce(r3, 0, false, true).second, kInt64));
  EXPECT_TRUE(ref::matches(native::mean(c3, {1, 2}), ref::mean(r3, {1, 2}), kFloat32));
  // A matrix product large enough for threaded BLAS.
  Tensor m1 = native::narrow(a, 0, 0, 96), m2 = native::narrow(b, 1, 0, 80);  // [96,1024] x [1024,80]
  EXPECT_TRUE(ref::matches(native::mm(m1, m2), ref::mm(ref::read(m1), ref::read(m2)), kFloat32, {1e-4, 1e-3}));
}

TEST(Parallel, ResultsDoNotDependOnTheThreadCount) {
  // Each output element is computed by one thread in a fixed order, so 1 and 2 threads agree exactly.
  Tensor a = ref::make(ref::random({512, 2048}, 8), kFloat32, Layout::kTransposed);
  auto run = [&](int threads) {
    ScopedNumThreads t(threads);
    return std::vector<Tensor>{native::sum(a, {1}), native::sum(a, {0}), native::softmax(a, 0), native::exp(a),
                               native::add(a, native::t(native::contiguous(native::t(a)))), native::var(a, {1})};
  };
  std::vector<Tensor> one = run(1), two = run(2);
  for (size_t i = 0; i < one.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(ref::matches(two[i], ref::read(one[i]), one[i].dtype(), {0, 0}));
  }
}

}  // namespace
}  // namespace ember
