// The CPU backends' combining loops (parallel/distributed/detail/reduce_kernels.h): the fused
// last step of a reduction, reduce_last_into, gives bit for bit what reduce_into, divide_by and
// a copy give one after another, for every dtype, op and divisor (its float paths multiply by
// the reciprocal of a power of two instead of dividing), on random non-integer values.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "parallel/distributed/detail/reduce_kernels.h"

namespace ember::parallel::detail {
namespace {

Tensor random_values(DType dtype, int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-100.0, 100.0);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(gen);
  return native::to(from_vector<double>(v, {n}), dtype);
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  std::vector<uint8_t> out(t.nbytes());
  std::memcpy(out.data(), t.raw_data(), out.size());
  return out;
}

TEST(ReduceKernels, FusedLastStepEqualsTheStepsOneAfterAnotherBitForBit) {
  const int64_t n = 1003;  // not a multiple of any vector width
  for (DType dtype : {kFloat32, kFloat64, kInt64, kInt32, kBFloat16, kFloat16}) {
    for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::MAX, ReduceOp::MIN, ReduceOp::PRODUCT}) {
      for (int64_t divisor : {1, 2, 3, 4, 5, 8}) {
        const Tensor a = random_values(dtype, n, 1), b = random_values(dtype, n, 2);
        Tensor want = native::clone(a);
        reduce_into(dtype, op, want.raw_data(), want.raw_data(), b.raw_data(), n);
        if (op == ReduceOp::AVG) divide_by(dtype, want.raw_data(), n, divisor);
        Tensor got = native::clone(a), copy = zeros({n}, TensorOptions(dtype));
        reduce_last_into(dtype, op, got.raw_data(), b.raw_data(), copy.raw_data(), n, divisor);
        EXPECT_EQ(bytes_of(got), bytes_of(want)) << dtype << " " << op << " divisor " << divisor;
        EXPECT_EQ(bytes_of(copy), bytes_of(want)) << dtype << " " << op << " divisor " << divisor << " (copy)";
        Tensor alone = native::clone(a);  // without a copy
        reduce_last_into(dtype, op, alone.raw_data(), b.raw_data(), nullptr, n, divisor);
        EXPECT_EQ(bytes_of(alone), bytes_of(want)) << dtype << " " << op << " divisor " << divisor << " (no copy)";
      }
    }
  }
}

TEST(ReduceKernels, AveragingByAPowerOfTwoIsExactDivision) {
  // divide_by multiplies by 1/2^k for floats: the quotient of each element, exactly.
  const int64_t n = 257;
  for (DType dtype : {kFloat32, kFloat64}) {
    for (int64_t divisor : {2, 4, 16}) {
      Tensor t = random_values(dtype, n, 3);
      const std::vector<double> before = t.to_vector<double>();
      divide_by(dtype, t.raw_data(), n, divisor);
      const std::vector<double> after = t.to_vector<double>();
      for (int64_t i = 0; i < n; ++i) {
        const double want = dtype == kFloat32 ? static_cast<double>(static_cast<float>(before[i]) / static_cast<float>(divisor))
                                              : before[i] / static_cast<double>(divisor);
        EXPECT_EQ(after[i], want) << dtype << " element " << i << " divisor " << divisor;
      }
    }
  }
}

}  // namespace
}  // namespace ember::parallel::detail
