// cumsum, the worked example of docs/ARCHITECTURE.md: the op against a plain running sum, its
// result dtype and errors, the gradient through gradcheck, and the CUDA kernel against the CPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "tests/support/error_text.h"

using namespace ember;
using ::testing::HasSubstr;

namespace {

// The running sum along `dim` of a contiguous [d0, d1, d2] float64 tensor, by three loops.
std::vector<double> running_sum(const std::vector<double>& x, const IntList& s, int64_t dim, bool reverse) {
  std::vector<double> out(x.size());
  for (int64_t i = 0; i < s[0]; ++i) {
    for (int64_t j = 0; j < s[1]; ++j) {
      for (int64_t k = 0; k < s[2]; ++k) {
        int64_t c[3] = {i, j, k};
        if (c[dim] != (reverse ? s[dim] - 1 : 0)) continue;  // the first element of a line
        double acc = 0;
        for (int64_t t = 0; t < s[dim]; ++t) {
          c[dim] = reverse ? s[dim] - 1 - t : t;
          const size_t at = static_cast<size_t>((c[0] * s[1] + c[1]) * s[2] + c[2]);
          acc += x[at];
          out[at] = acc;
        }
      }
    }
  }
  return out;
}

TEST(Cumsum, MatchesARunningSumAlongEveryDim) {
  Generator g(7);
  const IntList s{3, 4, 5};
  Tensor x = randn(s, TensorOptions(kFloat64), &g);
  const std::vector<double> xv = x.to_vector<double>();
  for (int64_t dim : {0, 1, 2, -1}) {
    for (bool reverse : {false, true}) {
      const std::vector<double> want = running_sum(xv, s, dim < 0 ? dim + 3 : dim, reverse);
      const std::vector<double> got = native::cumsum(x, dim, reverse).to_vector<double>();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_DOUBLE_EQ(got[i], want[i]) << "dim " << dim << " reverse " << reverse << " at " << i;
      }
    }
  }
}

TEST(Cumsum, NonContiguousInputFloat32AndScalar) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor t = native::transpose(x, 0, 1);  // [[1, 4], [2, 5], [3, 6]]
  EXPECT_EQ(native::cumsum(t, 0).to_vector<float>(), (std::vector<float>{1, 4, 3, 9, 6, 15}));
  EXPECT_EQ(native::cumsum(t, 1).to_vector<float>(), (std::vector<float>{1, 5, 2, 7, 3, 9}));
  Tensor s = native::cumsum(native::reshape(from_vector<double>({2.5}), {}), 0);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item(), 2.5);
  EXPECT_EQ(native::cumsum(empty({0, 3}, TensorOptions(kFloat32)), 0).sizes(), (IntList{0, 3}));
}

TEST(Cumsum, IntegersAndBoolSumIntoInt64) {
  Tensor i = native::cumsum(from_vector<int32_t>({3, -1, 4}), 0);
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{3, 2, 6}));
  Tensor b = native::cumsum(from_vector<bool>({true, false, true}), 0);
  EXPECT_EQ(b.dtype(), kInt64);
  EXPECT_EQ(b.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 2}));
}

TEST(Cumsum, BadArgumentsAreTypedErrors) {
  EXPECT_THAT(support::error_of<IndexError>([] { native::cumsum(zeros({2, 3}), 2); }), HasSubstr("cumsum"));
  EXPECT_THAT(support::error_of<TypeError>([] { native::cumsum(zeros({2}, TensorOptions(kBFloat16)), 0); }),
              HasSubstr("bfloat16"));
}

TEST(Cumsum, GradientIsTheReverseCumsum) {
  Generator g(3);
  Tensor x = randn({3, 4}, TensorOptions(kFloat64), &g);
  x.requires_grad_(true);
  for (int64_t dim : {0, 1}) {
    auto r = autograd::gradcheck([dim](const autograd::TensorList& in) { return cumsum(in[0], dim); }, {x});
    EXPECT_TRUE(r.ok) << "dim " << dim << ": " << r.message;
  }
}

TEST(Cumsum, CudaMatchesCpu) {
  if (!cuda_is_available()) GTEST_SKIP() << "no CUDA device: the CUDA kernel is compiled, not run";
  Generator g(5);
  Tensor x = randn({6, 7, 5}, TensorOptions(kFloat64), &g);
  for (DType dt : {kFloat32, kFloat64, kInt64}) {
    Tensor xc = dt == kInt64 ? native::to(native::mul(x, 100.0), kInt64) : native::to(x, dt);
    for (int64_t dim : {0, 1, 2}) {
      for (bool reverse : {false, true}) {
        Tensor want = native::cumsum(xc, dim, reverse);
        Tensor got = native::to(native::cumsum(native::to(xc, Device("cuda:0")), dim, reverse), Device::cpu());
        EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>()) << dt << " dim " << dim << " reverse " << reverse;
      }
    }
  }
}

}  // namespace
