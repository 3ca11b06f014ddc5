// 16-bit floats on CPU (Note [16-bit floats on CPU], core/ops/elementwise.cpp): element-wise
// ops, in-place ops, reductions and matrix products on bfloat16/float16 CPU tensors give
// exactly the float32 result of the widened operands rounded once to the 16-bit type.
#include <gtest/gtest.h>

#include <cstring>

#include "core/generator.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"

namespace ember::native {
namespace {

Tensor rand16(const IntList& sizes, uint64_t seed, DType dtype) {
  Generator g(seed);
  return to(randn(sizes, TensorOptions(kFloat32), &g), dtype);
}
Tensor wide(const Tensor& t) { return to(t, kFloat32); }
bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  Tensor x = contiguous(a), y = contiguous(b);
  return std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

class Half16 : public ::testing::TestWithParam<DType> {};

TEST_P(Half16, ElementwiseIsTheRoundedFloat32Result) {
  const DType d = GetParam();
  const Tensor a = rand16({5, 7}, 1, d), b = rand16({7}, 2, d);
  EXPECT_TRUE(bit_equal(add(a, b), to(add(wide(a), wide(b)), d)));
  EXPECT_TRUE(bit_equal(mul(a, b), to(mul(wide(a), wide(b)), d)));
  EXPECT_TRUE(bit_equal(div(a, b), to(div(wide(a), wide(b)), d)));
  EXPECT_TRUE(bit_equal(exp(a), to(exp(wide(a)), d)));
  EXPECT_TRUE(bit_equal(tanh(a), to(tanh(wide(a)), d)));
  EXPECT_TRUE(bit_equal(mul(a, 3.1), to(mul(wide(a), 3.1), d)));
  EXPECT_TRUE(bit_equal(gt(a, b), gt(wide(a), wide(b))));  // comparisons stay bool
  EXPECT_EQ(add(a, wide(a)).dtype(), kFloat32);             // promotion as before
}

TEST_P(Half16, InPlaceOpsRoundIntoSelf) {
  const DType d = GetParam();
  Tensor a = rand16({4, 6}, 3, d);
  const Tensor b = rand16({4, 6}, 4, d);
  const Tensor expected = to(add(wide(a), wide(b), 0.5), d);
  const int64_t version = a.version();
  add_(a, b, 0.5);
  EXPECT_TRUE(bit_equal(a, expected));
  EXPECT_GT(a.version(), version);
  Tensor c = rand16({3}, 5, d);
  const Tensor c_expected = to(mul(wide(c), 0.3), d);
  mul_(c, 0.3);
  EXPECT_TRUE(bit_equal(c, c_expected));
}

TEST_P(Half16, ReductionsAccumulateWideAndRoundOnce) {
  const DType d = GetParam();
  const Tensor a = rand16({6, 50}, 6, d);
  EXPECT_TRUE(bit_equal(sum(a), to(sum(wide(a)), d)));
  EXPECT_TRUE(bit_equal(sum(a, {0}), to(sum(wide(a), {0}), d)));
  EXPECT_TRUE(bit_equal(mean(a, {1}), to(mean(wide(a), {1}), d)));
  EXPECT_EQ(sum(a, {}, false, kFloat32).dtype(), kFloat32);
  EXPECT_TRUE(bit_equal(amax(a, {1}), to(amax(wide(a), {1}), d)));
  auto [v, i] = max(a, 1);
  auto [vw, iw] = max(wide(a), 1);
  EXPECT_TRUE(bit_equal(v, to(vw, d)));
  EXPECT_TRUE(bit_equal(i, iw));
}

TEST_P(Half16, MatrixProductsAreFloat32ProductsRoundedOnce) {
  const DType d = GetParam();
  const Tensor a = rand16({9, 40}, 7, d), b = rand16({40, 11}, 8, d), bias = rand16({11}, 9, d);
  EXPECT_TRUE(bit_equal(mm(a, b), to(mm(wide(a), wide(b)), d)));
  EXPECT_TRUE(bit_equal(mm(a, t(transpose(b, 0, 1))), to(mm(wide(a), wide(b)), d)));
  EXPECT_TRUE(bit_equal(addmm(bias, a, b), to(addmm(wide(bias), wide(a), wide(b)), d)));
  const Tensor ba = rand16({2, 3, 4}, 10, d), bb = rand16({2, 4, 5}, 11, d);
  EXPECT_TRUE(bit_equal(bmm(ba, bb), to(bmm(wide(ba), wide(bb)), d)));
}

INSTANTIATE_TEST_SUITE_P(CPU, Half16, ::testing::Values(kBFloat16, kFloat16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace ember::native
