// CUDA-vs-CPU columns of the multi-tensor ops (Note [Multi-tensor launches] in
// core/kernels/multi_tensor.h): adam_update_ / sgd_update_ over lists of CUDA tensors (one
// launch per device and dtype) against the same lists on CPU, several steps, float32 and
// float64, AMSGrad, AdamW, momentum/Nesterov; total_norm (one CUB reduction) for p = 1, 2, 3,
// inf, -inf, NaN, empty and mixed-dtype lists; scale_all_. launch_grid_optim_test covers the
// kernel bodies everywhere; these prove the launches on a GPU and skip without one.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"
#include "core/ops/random.h"
#include "tests/support/cuda.h"

namespace ember {
namespace {
using test_support::kGpu;

std::vector<Tensor> on(const std::vector<Tensor>& ts, Device d) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(native::to(native::clone(t), d));
  return out;
}

std::vector<Tensor> random_list(DType dt, double shift = 0.0) {
  std::vector<Tensor> out;
  for (int64_t n : {3, 0, 40000, 129}) out.push_back(native::add(native::to(randn({n}), dt), shift));
  return out;
}

void expect_close(const std::vector<Tensor>& gpu, const std::vector<Tensor>& cpu, double tol, const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  for (size_t t = 0; t < gpu.size(); ++t) {
    ASSERT_EQ(gpu[t].device(), kGpu) << what;
    const auto g = native::to(gpu[t], Device::cpu()).to_vector<double>(), c = cpu[t].to_vector<double>();
    ASSERT_EQ(g.size(), c.size()) << what;
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_NEAR(g[i], c[i], tol * (1 + std::fabs(c[i]))) << what << " tensor " << t << " element " << i;
    }
  }
}

TEST(CudaOptim, AdamMultiTensorStepMatchesCpu) {
  EMBER_REQUIRE_CUDA();
  manual_seed(1);
  for (DType dt : {kFloat32, kFloat64}) {
    for (int variant = 0; variant < 3; ++variant) {
      kernels::AdamArgs a;
      a.lr = 0.01;
      a.weight_decay = variant == 0 ? 0.0 : 0.1;
      a.decoupled = variant == 2;
      a.maximize = variant == 1;
      const bool amsgrad = variant != 0;
      std::vector<Tensor> p = random_list(dt), m = random_list(dt, 0.0), v = random_list(dt, 1.0);
      for (Tensor& t : m) t = native::mul(t, 0.0);
      for (Tensor& t : v) t = native::mul(t, 0.0);
      std::vector<Tensor> vmax = on(v, Device::cpu());
      std::vector<Tensor> pg = on(p, kGpu), mg = on(m, kGpu), vg = on(v, kGpu), vmaxg = on(vmax, kGpu);
      for (int step = 1; step <= 3; ++step) {
        const std::vector<Tensor> g = random_list(dt);
        const std::vector<double> steps(p.size(), static_cast<double>(step));
        native::adam_update_(p, g, m, v, amsgrad ? vmax : std::vector<Tensor>{}, steps, a);
        native::adam_update_(pg, on(g, kGpu), mg, vg, amsgrad ? vmaxg : std::vector<Tensor>{}, steps, a);
      }
      const std::string what = std::string(dtype_name(dt)) + " variant " + std::to_string(variant);
      const double tol = dt == kFloat32 ? 1e-5 : 1e-12;
      expect_close(pg, p, tol, "param " + what);
      expect_close(mg, m, tol, "exp_avg " + what);
      expect_close(vg, v, tol, "exp_avg_sq " + what);
      if (amsgrad) expect_close(vmaxg, vmax, tol, "max_exp_avg_sq " + what);
    }
  }
}

TEST(CudaOptim, SgdMultiTensorStepMatchesCpu) {
  EMBER_REQUIRE_CUDA();
  manual_seed(2);
  for (DType dt : {kFloat32, kFloat64}) {
    for (bool nesterov : {false, true}) {
      kernels::SgdArgs a;
      a.lr = 0.1;
      a.momentum = 0.9;
      a.weight_decay = 0.01;
      a.nesterov = nesterov;
      std::vector<Tensor> p = random_list(dt), b = random_list(dt);
      std::vector<Tensor> pg = on(p, kGpu), bg = on(b, kGpu);
      for (int step = 0; step < 3; ++step) {
        const std::vector<Tensor> g = random_list(dt);
        const std::vector<bool> init(p.size(), step == 0);
        native::sgd_update_(p, g, b, init, a);
        native::sgd_update_(pg, on(g, kGpu), bg, init, a);
      }
      const double tol = dt == kFloat32 ? 1e-5 : 1e-12;
      expect_close(pg, p, tol, std::string("sgd param ") + dtype_name(dt));
      expect_close(bg, b, tol, std::string("sgd buffer ") + dtype_name(dt));
    }
  }
}

TEST(CudaOptim, TotalNormAndScaleMatchCpu) {
  EMBER_REQUIRE_CUDA();
  manual_seed(3);
  std::vector<Tensor> cpu = random_list(kFloat32, 0.25);
  for (const Tensor& t : random_list(kFloat64)) cpu.push_back(t);
  cpu.push_back(native::transpose(randn({6, 5}), 0, 1));  // non-contiguous
  const std::vector<Tensor> gpu = on(cpu, kGpu);
  for (double p : {1.0, 2.0, 3.0, double(INFINITY), -double(INFINITY)}) {
    const double want = native::total_norm(cpu, p);
    EXPECT_NEAR(native::total_norm(gpu, p), want, 1e-9 * std::fabs(want)) << "p=" << p;
  }
  EXPECT_EQ(native::total_norm({native::to(zeros({0}), kGpu)}, 2.0), 0.0);
  const std::vector<Tensor> with_nan = {native::to(from_vector<float>({1.0f, NAN}, {2}), kGpu)};
  EXPECT_TRUE(std::isnan(native::total_norm(with_nan, 2.0)));
  EXPECT_TRUE(std::isnan(native::total_norm(with_nan, INFINITY)));
  std::vector<Tensor> scaled = on(cpu, kGpu), want = on(cpu, Device::cpu());
  native::scale_all_(scaled, 0.37);
  native::scale_all_(want, 0.37);
  expect_close(scaled, want, 0.0, "scale_all_");
}

}  // namespace
}  // namespace ember
