// CUDA-vs-CPU columns of the ops whose CUDA path runs launch-grid functors (index_select,
// gather, scatter_add_, index_add_, masked_fill, one_hot, softmax / log_softmax forward and
// backward, the fused class-index losses, every random op): same inputs, float32 and float64, non-contiguous views, and the
// same typed errors on both devices. The CPU grid-emulation tests (launch_grid_test) cover the
// kernel bodies everywhere; these prove the launches on a GPU and skip without one.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"
#include "core/ops/random.h"
#include "tests/support/cuda.h"
#include "tests/support/error_text.h"

namespace ember {
namespace {
using namespace native;

using test_support::kGpu;
const Device kCpu = Device::cpu();

Tensor gpu(const Tensor& t) { return to(t, kGpu); }

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.device(), kGpu) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const auto g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " at " << i;
    } else {
      EXPECT_NEAR(g[i], w[i], tol * (1 + std::fabs(w[i]))) << what << " at " << i;
    }
  }
}

Tensor ints(const std::vector<int64_t>& v, IntList sizes = {}) { return from_vector(v, sizes); }

TEST(CudaOps, IndexOpsMatchCpu) {
  EMBER_REQUIRE_CUDA();
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor src = transpose(to(randn({7, 6, 5}), dt), 0, 2);  // [5, 6, 7], non-contiguous
    Tensor index = ints({0, -1, 3, 3, 5});
    expect_close(index_select(gpu(src), 1, gpu(index)), index_select(src, 1, index), 0, "index_select");
    expect_close(index_select(gpu(src), 1, gpu(to(index, kInt32))), index_select(src, 1, index), 0,
                 "index_select int32 index");
    Tensor gi = ints({0, 4, -1, 2, 1, 0, 3, 3, 0, 1, 2, 4}, {4, 3});
    Tensor a = transpose(to(randn({5, 4}), dt), 0, 1);
    expect_close(gather(gpu(a), 1, gpu(gi)), gather(a, 1, gi), 0, "gather");
    Tensor self = to(randn({4, 5}), dt), s = to(randn({4, 3}), dt);
    expect_close(scatter_add(gpu(self), 1, gpu(gi), gpu(s)), scatter_add(self, 1, gi, s), 1e-6, "scatter_add");
    Tensor base = to(randn({5, 3}), dt), add_src = transpose(to(randn({3, 4}), dt), 0, 1);
    Tensor want = clone(base), got = gpu(base);
    index_add_(want, 0, ints({4, 0, 4, -1}), add_src);
    index_add_(got, 0, gpu(ints({4, 0, 4, -1})), gpu(add_src));
    expect_close(got, want, 1e-6, "index_add_");
    Tensor mask = gt(randn({5, 6, 7}), 0.0);
    expect_close(masked_fill(gpu(src), gpu(mask), -2.5), masked_fill(src, mask, -2.5), 0, "masked_fill");
  }
  Tensor cls = ints({2, 0, 3, 3, 1}, {5});
  Tensor oh = one_hot(gpu(cls), -1);
  expect_close(oh, one_hot(cls, -1), 0, "one_hot inferred classes");
  expect_close(one_hot(gpu(cls), 6), one_hot(cls, 6), 0, "one_hot");
}

// scatter_add_/index_add_ on 16-bit floats: 200 ones into each of two neighbouring elements,
// which share one 32-bit word (Note [16-bit atomic add]): a lost update would show as a count
// below 200 (exact in bfloat16 and float16); and index_add_ of small integers against float32.
TEST(CudaOps, ScatterAddAndIndexAddTakeSixteenBitFloats) {
  EMBER_REQUIRE_CUDA();
  std::vector<int64_t> alternating(400);
  for (size_t i = 0; i < alternating.size(); ++i) alternating[i] = static_cast<int64_t>(i % 2);
  for (DType dt : {kBFloat16, kFloat16}) {
    Tensor self = to(zeros({2}), kGpu, dt);
    scatter_add_(self, 0, gpu(ints(alternating)), to(ones({400}), kGpu, dt));
    expect_close(to(self, kFloat32), gpu(full({2}, 200.0)), 0, std::string("scatter_add_ ") + dtype_name(dt));
    Tensor base = to(to(mul(rand({5, 3}), 16.0), kInt64), kFloat32);
    Tensor add_src = to(to(mul(rand({4, 3}), 16.0), kInt64), kFloat32);
    Tensor want = clone(base);
    index_add_(want, 0, ints({4, 0, 4, -1}), add_src);
    Tensor got = to(base, kGpu, dt);
    index_add_(got, 0, gpu(ints({4, 0, 4, -1})), to(add_src, kGpu, dt));
    expect_close(to(got, kFloat32), gpu(want), 0, std::string("index_add_ ") + dtype_name(dt));
  }
}

TEST(CudaOps, IndexOutOfRangeIsAnIndexErrorNamingTheOpAndWritesNothing) {
  EMBER_REQUIRE_CUDA();
  Tensor w = gpu(randn({4, 3}));
  auto expect_index_error = [](auto fn, const char* op) {
    const std::string what = support::error_of<IndexError>([&] { fn(); });
    EXPECT_NE(what.find(op), std::string::npos) << what;
  };
  expect_index_error([&] { index_select(w, 0, gpu(ints({1, 4}))); }, "index_select");
  expect_index_error([&] { gather(w, 1, gpu(ints({0, 3}, {1, 2}))); }, "gather");
  Tensor before = to(w, kCpu);
  expect_index_error([&] { index_add_(w, 0, gpu(ints({0, -5})), gpu(ones({2, 3}))); }, "index_add_");
  expect_index_error([&] { scatter_add_(w, 0, gpu(ints({9}, {1, 1})), gpu(ones({1, 1}))); }, "scatter_add_");
  expect_index_error([&] { one_hot(gpu(ints({0, -1})), 3); }, "one_hot");
  expect_close(w, before, 0, "destination unchanged after the errors");
  // The context is not poisoned: the device keeps working.
  expect_close(index_select(w, 0, gpu(ints({3, 0}))), index_select(before, 0, ints({3, 0})), 0, "after errors");
}

TEST(CudaOps, SoftmaxForwardAndBackwardMatchCpu) {
  EMBER_REQUIRE_CUDA();
  for (DType dt : {kFloat32, kFloat64}) {
    const double tol = dt == kFloat32 ? 1e-6 : 1e-12;
    Tensor x = transpose(to(mul(randn({6, 5, 4}), 3.0), dt), 0, 2);  // non-contiguous
    for (int64_t dim : {0, 1, 2, -1}) {
      Tensor y = softmax(x, dim), ly = log_softmax(x, dim);
      expect_close(softmax(gpu(x), dim), y, tol, "softmax");
      expect_close(log_softmax(gpu(x), dim), ly, tol, "log_softmax");
      Tensor g = to(randn(x.sizes()), dt);
      expect_close(softmax_backward(gpu(g), gpu(y), dim), softmax_backward(g, y, dim), tol, "softmax_backward");
      expect_close(log_softmax_backward(gpu(g), gpu(ly), dim), log_softmax_backward(g, ly, dim), tol,
                   "log_softmax_backward");
    }
  }
  Tensor inf_row = full({2, 3}, -INFINITY);
  expect_close(log_softmax(gpu(inf_row), 1), log_softmax(inf_row, 1), 0, "an all -inf row");
}

TEST(CudaOps, ClassIndexLossesForwardAndBackwardMatchCpu) {
  EMBER_REQUIRE_CUDA();
  for (DType dt : {kFloat32, kFloat64}) {
    const double tol = dt == kFloat32 ? 1e-5 : 1e-12;
    for (int64_t S : {1, 3}) {
      Tensor x = to(mul(randn({6, 7, S}), 2.0), dt);
      Tensor target = ints({0, 6, -100, 3, 3, 1, 2, 5, 4, 0, 6, 1, 2, 3, 4, 5, 6, 0}, {18});
      target = reshape(narrow(target, 0, 0, 6 * S), {6, S});
      Tensor weight = add(to(rand({7}), kFloat64), 0.5);
      for (bool ce : {true, false}) {
        const double ls = ce ? 0.1 : 0.0;
        auto want = class_loss_forward(x, target, weight, -100, ls, ce);
        auto got = class_loss_forward(gpu(x), gpu(target), gpu(weight), -100, ls, ce);
        expect_close(got.loss, want.loss, tol, "per-row loss");
        EXPECT_NEAR(got.sum, want.sum, tol * (1 + std::fabs(want.sum)));
        EXPECT_NEAR(got.total_weight, want.total_weight, 1e-12);
        Tensor ge = to(randn({6 * S}), dt);
        Tensor gx = class_loss_backward(x.sizes(), dt, ce ? gpu(x) : Tensor(), gpu(target), gpu(weight), got.lse,
                                        gpu(ge), 0.0, -100, ls, ce);
        Tensor want_gx = class_loss_backward(x.sizes(), dt, ce ? x : Tensor(), target, weight, want.lse, ge, 0.0, -100,
                                             ls, ce);
        expect_close(gx, want_gx, tol, "input gradient");
      }
    }
  }
  EXPECT_THROW(class_loss_forward(gpu(randn({2, 3})), gpu(ints({0, 3})), Tensor(), -100, 0.0, true), IndexError);
}

// Note [Philox stream layout]: the same seed and offset give the same numbers on both devices.
TEST(CudaOps, RandomOpsGiveTheCpuStreamForTheSameSeed) {
  EMBER_REQUIRE_CUDA();
  for (DType dt : {kFloat32, kFloat64}) {
    Generator gc(1234), gg(1234, kGpu);
    auto cpu = TensorOptions(dt), cuda = TensorOptions(dt).device(kGpu);
    expect_close(rand({1001}, cuda, &gg), rand({1001}, cpu, &gc), 0, "rand (bitwise)");
    // Box-Muller through the device's logf/sinf/cosf: equal to rounding.
    expect_close(randn({1001}, cuda, &gg), randn({1001}, cpu, &gc), dt == kFloat32 ? 1e-5 : 1e-12, "randn");
    Tensor u = transpose(empty({30, 20}, cuda), 0, 1), uc = transpose(empty({30, 20}, cpu), 0, 1);
    uniform_(u, -2.0, 3.0, &gg);
    uniform_(uc, -2.0, 3.0, &gc);
    expect_close(u, uc, 0, "uniform_ into a non-contiguous view");
    Tensor nrm = empty({77}, cuda), nrmc = empty({77}, cpu);
    normal_(nrm, 1.0, 0.5, &gg);
    normal_(nrmc, 1.0, 0.5, &gc);
    expect_close(nrm, nrmc, dt == kFloat32 ? 1e-5 : 1e-12, "normal_");
    expect_close(bernoulli({501}, 0.25, cuda, &gg), bernoulli({501}, 0.25, cpu, &gc), 0, "bernoulli(p)");
    Tensor p = rand({333}, cpu);
    expect_close(bernoulli(gpu(p), &gg), bernoulli(p, &gc), 0, "bernoulli(tensor)");
    expect_close(randint(-3, 1000, {257}, TensorOptions(kInt64).device(kGpu), &gg),
                 randint(-3, 1000, {257}, TensorOptions(kInt64), &gc), 0, "randint");
    expect_close(randperm(1000, TensorOptions(kInt64).device(kGpu), &gg), randperm(1000, TensorOptions(kInt64), &gc),
                 0, "randperm");
    EXPECT_EQ(gg.get_state(), gc.get_state()) << "both generators advanced alike";
  }
}

TEST(CudaOps, RandomOpsKeepTheirTypedErrorsOnCuda) {
  EMBER_REQUIRE_CUDA();
  EXPECT_THROW(bernoulli(gpu(tensor({0.5, 1.5}))), ValueError);
  EXPECT_THROW(bernoulli(gpu(tensor({0.5, NAN}))), ValueError);
  EXPECT_THROW(rand({3}, TensorOptions(kBFloat16).device(kGpu)), TypeError);
  Generator cpu_gen(1);
  EXPECT_THROW(rand({3}, TensorOptions().device(kGpu), &cpu_gen), ValueError);  // a CPU generator for CUDA
}

}  // namespace
}  // namespace ember
