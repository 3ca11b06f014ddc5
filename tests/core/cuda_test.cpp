// The CUDA backend (core/cuda): device count, registration, and every CUDA kernel checked
// against ember's CPU path on the same inputs (element-wise with broadcasting and
// non-contiguous views, casts including 16-bit floats, reductions, matmul, copies), plus the
// cuda:0 memory limit. Built only with CUDA; tests that need a GPU skip with "no CUDA device".
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/error.h"
#include "core/ops/reduce_stubs.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "tests/support/error_text.h"

namespace ember {
namespace {
using namespace native;

#define REQUIRE_CUDA() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"

const Device kGpu = Device::cuda(0);
const Device kCpu = Device::cpu();

Tensor gpu(const Tensor& t) { return to(t, kGpu); }

// Expects `got` (any device) to equal `want` (CPU) elementwise within atol + rtol*|want|.
void expect_close(const Tensor& got, const Tensor& want, double rtol = 1e-6, double atol = 1e-6,
                  const std::string& what = "") {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  ASSERT_EQ(g.size(), w.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " at " << i;
      continue;
    }
    if (std::isinf(w[i])) {
      EXPECT_EQ(g[i], w[i]) << what << " at " << i;
      continue;
    }
    EXPECT_NEAR(g[i], w[i], atol + rtol * std::fabs(w[i])) << what << " at " << i;
  }
}

Tensor randn_cpu(const IntList& sizes, DType dtype = kFloat32) { return to(randn(sizes), dtype); }

// ---- without a GPU ------------------------------------------------------------------------

TEST(Cuda, DeviceCountQueryWorks) {
  const int n = cuda_device_count();
  EXPECT_GE(n, 0);
  EXPECT_LE(n, kMaxDevicesPerType);
  EXPECT_EQ(cuda_device_count(), n);  // cached, stable
  EXPECT_EQ(cuda_is_available(), n > 0);
}

TEST(Cuda, BackendIsRegisteredInACudaBuild) {
  // Registration is explicit and lazy: the first use fills the stubs' CUDA slots and installs
  // the raw memory.
  EXPECT_TRUE(native::reduce_stub.has_kernel(DeviceType::CUDA));
  auto backend = ember::detail::raw_memory_backend(DeviceType::CUDA);
  EXPECT_NE(backend.alloc, nullptr);
  EXPECT_NE(backend.free, nullptr);
}

TEST(Cuda, DeviceBeyondTheCountIsAClearError) {
  const int n = cuda_device_count();
  const std::string what =
      support::error_of<Error>([&] { empty({4}, TensorOptions(kFloat32).device(Device::cuda(n))); });
  EXPECT_NE(what.find("CUDA device(s) are visible"), std::string::npos) << what;
}

// ---- with a GPU: CUDA equals CPU ------------------------------------------------------------

TEST(Cuda, CopyRoundTripAndAcrossLayouts) {
  REQUIRE_CUDA();
  for (DType dt : {kFloat32, kFloat64, kInt64, kInt32, kBool}) {
    Tensor h = to(mul(randn({5, 7}), 3.0), dt);
    Tensor d = gpu(h);
    EXPECT_EQ(d.device(), kGpu);
    expect_close(to(d, kCpu), h, 0, 0, "round trip");
    // Non-contiguous device->host, host->device and device->device copies.
    expect_close(to(transpose(d, 0, 1), kCpu), contiguous(transpose(h, 0, 1)), 0, 0, "transposed d2h");
    expect_close(gpu(transpose(h, 0, 1)), contiguous(transpose(h, 0, 1)), 0, 0, "transposed h2d");
    expect_close(contiguous(transpose(d, 0, 1)), contiguous(transpose(h, 0, 1)), 0, 0, "transposed d2d");
    Tensor dst = zeros({5, 7}, TensorOptions(dt).device(kGpu));
    copy_(dst, narrow(d, 0, 1, 1));  // broadcast on device
    expect_close(dst, contiguous(expand(narrow(h, 0, 1, 1), {5, 7})), 0, 0, "broadcast copy");
  }
}

TEST(Cuda, CastsBetweenAllDtypesMatchCpu) {
  REQUIRE_CUDA();
  Tensor h = mul(randn({3, 4}), 10.0);
  for (DType from : {kFloat32, kFloat64, kInt64, kInt32, kBool}) {
    for (DType to_t : {kFloat32, kFloat64, kInt64, kInt32, kBool}) {
      Tensor src = to(h, from);
      expect_close(to(gpu(src), to_t), to(src, to_t), 0, 0, "cast");
    }
  }
  // 16-bit floats exist on CUDA: float -> half/bfloat16 -> float matches the CPU conversion.
  for (DType half : {kFloat16, kBFloat16}) {
    Tensor want = to(to(h, half), kFloat32);
    expect_close(to(to(gpu(h), half), kFloat32), want, 0, 0, "16-bit");
  }
}

TEST(Cuda, BinaryOpsWithBroadcastingAndViewsMatchCpu) {
  REQUIRE_CUDA();
  Tensor a = randn_cpu({4, 1, 6}), b = randn_cpu({3, 6});
  Tensor bt = transpose(randn_cpu({6, 3}), 0, 1);  // non-contiguous [3, 6]
  Tensor pa = add(abs(a), 0.5);
  struct Case {
    const char* name;
    Tensor (*fn)(const Tensor&, const Tensor&);
  };
  const Case cases[] = {
      {"add", [](const Tensor& x, const Tensor& y) { return add(x, y, 2.5); }},
      {"sub", [](const Tensor& x, const Tensor& y) { return sub(x, y); }},
      {"mul", [](const Tensor& x, const Tensor& y) { return mul(x, y); }},
      {"div", [](const Tensor& x, const Tensor& y) { return div(x, y); }},
      {"maximum", [](const Tensor& x, const Tensor& y) { return maximum(x, y); }},
      {"minimum", [](const Tensor& x, const Tensor& y) { return minimum(x, y); }},
      {"eq", [](const Tensor& x, const Tensor& y) { return eq(x, y); }},
      {"lt", [](const Tensor& x, const Tensor& y) { return lt(x, y); }},
      {"ge", [](const Tensor& x, const Tensor& y) { return ge(x, y); }},
      {"tanh_backward", [](const Tensor& x, const Tensor& y) { return tanh_backward(x, y); }},
      {"gelu_backward", [](const Tensor& x, const Tensor& y) { return gelu_backward(x, y); }},
  };
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor ha = to(a, dt), hb = to(b, dt), hbt = to(bt, dt);
    for (const Case& c : cases) {
      expect_close(c.fn(gpu(ha), gpu(hb)), c.fn(ha, hb), 1e-5, 1e-6, c.name);
      expect_close(c.fn(gpu(ha), gpu(hbt)), c.fn(ha, hbt), 1e-5, 1e-6, std::string(c.name) + " (view)");
    }
    expect_close(pow(gpu(to(pa, dt)), gpu(hb)), pow(to(pa, dt), hb), 1e-5, 1e-6, "pow");
  }
  // Integers and bool.
  Tensor ia = to(mul(a, 10.0), kInt64), ib = add(to(mul(b, 10.0), kInt64), 100.0);
  expect_close(add(gpu(ia), gpu(ib)), add(ia, ib), 0, 0, "int add");
  expect_close(mul(gpu(to(ia, kInt32)), gpu(to(ib, kInt32))), mul(to(ia, kInt32), to(ib, kInt32)), 0, 0, "int32 mul");
  expect_close(div(gpu(ia), gpu(ib)), div(ia, ib), 1e-6, 1e-6, "int div -> float");
  Tensor ba = gt(a, 0.0), bb = lt(b, 0.2);
  expect_close(logical_and(gpu(ba), gpu(bb)), logical_and(ba, bb), 0, 0, "logical_and");
  expect_close(logical_or(gpu(ba), gpu(bb)), logical_or(ba, bb), 0, 0, "logical_or");
  EXPECT_THROW(add(gpu(ba), gpu(bb)), TypeError);  // as on CPU
}

TEST(Cuda, UnaryOpsMatchCpu) {
  REQUIRE_CUDA();
  Tensor x = randn_cpu({7, 9});
  Tensor xv = narrow(transpose(randn_cpu({12, 7}), 0, 1), 1, 2, 9);  // non-contiguous [7, 9]
  Tensor pos = add(abs(x), 0.1);
  using Fn = Tensor (*)(const Tensor&);
  const std::pair<const char*, Fn> cases[] = {
      {"neg", [](const Tensor& t) { return neg(t); }},         {"abs", [](const Tensor& t) { return abs(t); }},
      {"sign", [](const Tensor& t) { return sign(t); }},       {"exp", [](const Tensor& t) { return exp(t); }},
      {"sin", [](const Tensor& t) { return sin(t); }},         {"cos", [](const Tensor& t) { return cos(t); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }},       {"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
      {"relu", [](const Tensor& t) { return relu(t); }},       {"gelu", [](const Tensor& t) { return gelu(t); }},
      {"erf", [](const Tensor& t) { return erf(t); }},         {"isnan", [](const Tensor& t) { return isnan(t); }},
      {"isfinite", [](const Tensor& t) { return isfinite(t); }},
      {"add_s", [](const Tensor& t) { return add(t, 1.5); }},  {"mul_s", [](const Tensor& t) { return mul(t, -2.0); }},
      {"rsub_s", [](const Tensor& t) { return rsub(t, 3.0); }}, {"gt_s", [](const Tensor& t) { return gt(t, 0.25); }},
      {"clamp", [](const Tensor& t) { return clamp(t, -0.5, 0.5); }},
  };
  for (DType dt : {kFloat32, kFloat64}) {
    for (const auto& [name, fn] : cases) {
      expect_close(fn(gpu(to(x, dt))), fn(to(x, dt)), 1e-5, 1e-6, name);
      expect_close(fn(gpu(to(xv, dt))), fn(to(xv, dt)), 1e-5, 1e-6, std::string(name) + " (view)");
    }
    Tensor p = to(pos, dt);
    expect_close(log(gpu(p)), log(p), 1e-5, 1e-6, "log");
    expect_close(log1p(gpu(p)), log1p(p), 1e-5, 1e-6, "log1p");
    expect_close(sqrt(gpu(p)), sqrt(p), 1e-5, 1e-6, "sqrt");
    expect_close(rsqrt(gpu(p)), rsqrt(p), 1e-5, 1e-6, "rsqrt");
    expect_close(reciprocal(gpu(p)), reciprocal(p), 1e-5, 1e-6, "reciprocal");
    expect_close(pow(gpu(p), 1.7), pow(p, 1.7), 1e-5, 1e-6, "pow scalar");
  }
  Tensor xi = to(mul(x, 10.0), kInt64);
  expect_close(neg(gpu(xi)), neg(xi), 0, 0, "int neg");
  expect_close(abs(gpu(xi)), abs(xi), 0, 0, "int abs");
  expect_close(full({3, 5}, 2.5, TensorOptions(kFloat32).device(kGpu)), full({3, 5}, 2.5), 0, 0, "fill");
  expect_close(zeros({4}, TensorOptions(kInt32).device(kGpu)), zeros({4}, TensorOptions(kInt32)), 0, 0, "zeros");
}

TEST(Cuda, TernaryOpsMatchCpu) {
  REQUIRE_CUDA();
  Tensor c = gt(randn_cpu({4, 5}), 0.0), a = randn_cpu({4, 5}), b = randn_cpu({5});
  expect_close(where(gpu(c), gpu(a), gpu(b)), where(c, a, b), 0, 0, "where");
  expect_close(masked_fill(gpu(a), gpu(c), -7.0), masked_fill(a, c, -7.0), 0, 0, "masked_fill");
  Tensor s = randn_cpu({4, 5}), d = add(abs(randn_cpu({4, 5})), 0.5);
  Tensor hs = clone(s), gs = gpu(s);
  addcmul_(hs, a, d, 0.5);
  addcmul_(gs, gpu(a), gpu(d), 0.5);
  expect_close(gs, hs, 1e-6, 1e-6, "addcmul_");
  addcdiv_(hs, a, d, 2.0);
  addcdiv_(gs, gpu(a), gpu(d), 2.0);
  expect_close(gs, hs, 1e-6, 1e-6, "addcdiv_");
  lerp_(hs, a, 0.3);
  lerp_(gs, gpu(a), 0.3);
  expect_close(gs, hs, 1e-6, 1e-6, "lerp_");
}

TEST(Cuda, ReductionsMatchCpu) {
  REQUIRE_CUDA();
  Tensor x = randn_cpu({6, 5, 4});
  Tensor xv = permute(randn_cpu({4, 6, 5}), {1, 2, 0});  // non-contiguous [6, 5, 4]
  for (const Tensor& h : {x, xv}) {
    Tensor d = gpu(h);
    for (const IntList& dims : {IntList{}, IntList{0}, IntList{2}, IntList{0, 2}, IntList{-1, 1}}) {
      for (bool keep : {false, true}) {
        expect_close(sum(d, dims, keep), sum(h, dims, keep), 1e-5, 1e-5, "sum");
        expect_close(mean(d, dims, keep), mean(h, dims, keep), 1e-5, 1e-5, "mean");
        expect_close(amax(d, dims, keep), amax(h, dims, keep), 0, 0, "amax");
        expect_close(amin(d, dims, keep), amin(h, dims, keep), 0, 0, "amin");
        expect_close(prod(d, dims, keep), prod(h, dims, keep), 1e-5, 1e-6, "prod");
        expect_close(var(d, dims, 1, keep), var(h, dims, 1, keep), 1e-5, 1e-5, "var");
      }
    }
    for (int64_t dim : {0, 1, 2}) {
      auto [gv, gi] = max(d, dim, true);
      auto [hv, hi] = max(h, dim, true);
      expect_close(gv, hv, 0, 0, "max values");
      expect_close(gi, hi, 0, 0, "max indices");
      expect_close(argmin(d, dim), argmin(h, dim), 0, 0, "argmin");
    }
  }
  Tensor xi = to(mul(x, 10.0), kInt64);
  expect_close(sum(gpu(xi), {1}), sum(xi, {1}), 0, 0, "int sum");
  expect_close(sum(gpu(to(xi, kInt32))), sum(to(xi, kInt32)), 0, 0, "int32 sum -> int64");
  Tensor bx = gt(x, 0.0);
  EXPECT_EQ(all(gpu(bx)).item(), all(bx).item());
  EXPECT_EQ(any(gpu(bx)).item(), any(bx).item());
  EXPECT_EQ(all(gpu(ones({3}))).item(), 1.0);
  // Empty reductions: sum of nothing is 0, as on CPU.
  Tensor e = zeros({0, 3});
  expect_close(sum(gpu(e), {0}), sum(e, {0}), 0, 0, "empty sum");
}

TEST(Cuda, MatmulMatchesCpuIncludingTransposedOperands) {
  REQUIRE_CUDA();
  for (DType dt : {kFloat32, kFloat64}) {
    const double tol = dt == kFloat32 ? 1e-4 : 1e-10;
    Tensor a = randn_cpu({33, 17}, dt), b = randn_cpu({17, 9}, dt);
    expect_close(mm(gpu(a), gpu(b)), mm(a, b), tol, tol, "mm");
    Tensor at = transpose(randn_cpu({17, 33}, dt), 0, 1), bt = transpose(randn_cpu({9, 17}, dt), 0, 1);
    expect_close(mm(gpu(at), gpu(b)), mm(at, b), tol, tol, "mm A^T");
    expect_close(mm(gpu(a), gpu(bt)), mm(a, bt), tol, tol, "mm B^T");
    expect_close(mm(gpu(at), gpu(bt)), mm(at, bt), tol, tol, "mm A^T B^T");
    Tensor bias = randn_cpu({33, 9}, dt);
    expect_close(addmm(gpu(bias), gpu(a), gpu(b), 0.5, 2.0), addmm(bias, a, b, 0.5, 2.0), tol, tol, "addmm");
    Tensor x = randn_cpu({3, 33, 17}, dt), y = randn_cpu({3, 17, 9}, dt);
    expect_close(bmm(gpu(x), gpu(y)), bmm(x, y), tol, tol, "bmm");
    Tensor v = randn_cpu({17}, dt);
    expect_close(matmul(gpu(a), gpu(v)), matmul(a, v), tol, tol, "matmul matrix-vector");
  }
}

TEST(Cuda, MemoryLimitRaisesOutOfMemoryThenRecovers) {
  REQUIRE_CUDA();
  const int64_t mb = int64_t(1) << 20;
  empty_cache(kGpu);
  set_memory_limit(kGpu, 64 * mb);
  const int64_t ooms = memory_stats(kGpu).num_ooms;
  {
    Tensor a = empty({16 * mb / 4}, TensorOptions(kFloat32).device(kGpu));  // 16 MiB
    const std::string what = support::error_of<OutOfMemoryError>([&] {
      Tensor b = empty({96 * mb / 4}, TensorOptions(kFloat32).device(kGpu));  // 96 MiB > limit
    });
    EXPECT_NE(what.find("cuda:0"), std::string::npos) << what;
    EXPECT_EQ(memory_stats(kGpu).num_ooms, ooms + 1);
  }
  Tensor c = empty({48 * mb / 4}, TensorOptions(kFloat32).device(kGpu));  // fits once `a` is gone
  fill_(c, 1.0);
  EXPECT_EQ(sum(c).item(), static_cast<double>(48 * mb / 4));
  c = Tensor();
  set_memory_limit(kGpu, 0);
  empty_cache(kGpu);
}

}  // namespace
}  // namespace ember
