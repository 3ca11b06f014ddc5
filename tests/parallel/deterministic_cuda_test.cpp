// The deterministic mode on CUDA (label gpu; skips without a device): the fixed-point kernels of
// core/kernels/cuda/fixed_point.cu give the CPU driver's bits (the same functors: Note
// [Fixed-point gradient sums]), detail::exact_sum of CUDA terms equals the CPU's, and
// DataParallel's deterministic option gives the same bits for one replica, two replicas on one
// GPU, every visible GPU, and a group-less DeterministicReducer running the shards one by one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/ops/fixed_point.h"
#include "core/ops/native.h"
#include "parallel/deterministic_reducer.h"
#include "tests/parallel/deterministic_shards_util.h"
#include "tests/support/cuda.h"

using namespace ember;
using test_support::kGpu;

namespace {

template <typename T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Values with ties at exponent 0 (0.5, -2.5), a -0.0 and a spread of magnitudes.
template <typename T>
Tensor term(uint64_t seed, int64_t n, DType dt) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-4.0, 4.0);
  std::vector<T> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<T>(std::ldexp(u(rng), static_cast<int>(rng() % 9) - 4));
  v[1] = static_cast<T>(0.5);
  v[2] = static_cast<T>(-2.5);
  v[3] = static_cast<T>(-0.0);
  return native::to(from_vector(v, {n}), dt);
}

template <typename T>
void check_kernels(DType dt) {
  const int64_t n = 100003;  // not a multiple of any block size
  for (int exponent : {0, 20, 59, 1040}) {
    Tensor acc_cpu = zeros({n}, TensorOptions(kInt64)), acc_gpu = zeros({n}, TensorOptions(kInt64).device(kGpu));
    for (uint64_t s = 0; s < 3; ++s) {
      const Tensor t = exponent > 1000 ? native::mul(term<T>(s, n, dt), scalar_tensor(std::ldexp(1.0, -1000)))
                                       : term<T>(s, n, dt);
      EXPECT_EQ(native::fixed_point_max_abs(t), native::fixed_point_max_abs(native::to(t, kGpu))) << exponent;
      native::fixed_point_accumulate_(acc_cpu, t, exponent);
      native::fixed_point_accumulate_(acc_gpu, native::to(t, kGpu), exponent);
    }
    ASSERT_TRUE(same_bytes(acc_cpu.to_vector<int64_t>(), native::to(acc_gpu, Device::cpu()).to_vector<int64_t>()))
        << exponent;
    Tensor out_cpu = empty({n}, TensorOptions(dt)), out_gpu = empty({n}, TensorOptions(dt).device(kGpu));
    native::fixed_point_to_float_(out_cpu, acc_cpu, exponent, 3.0);
    native::fixed_point_to_float_(out_gpu, acc_gpu, exponent, 3.0);
    ASSERT_TRUE(same_bytes(out_cpu.to_vector<T>(), native::to(out_gpu, Device::cpu()).to_vector<T>())) << exponent;
  }
  std::vector<T> with_nan(1000, static_cast<T>(1));
  with_nan[777] = static_cast<T>(NAN);
  EXPECT_EQ(native::fixed_point_max_abs(native::to(from_vector(with_nan, {1000}), kGpu)), INFINITY);
  EXPECT_EQ(native::fixed_point_max_abs(empty({0}, TensorOptions(dt).device(kGpu))), 0.0);
}

TEST(FixedPointCuda, KernelsGiveTheCpuDriversBits) {
  EMBER_REQUIRE_CUDA();
  check_kernels<float>(kFloat32);
  check_kernels<double>(kFloat64);
}

TEST(FixedPointCuda, ExactSumOfCudaTermsEqualsTheCpuSum) {
  EMBER_REQUIRE_CUDA();
  std::vector<Tensor> cpu_terms, gpu_terms;
  for (uint64_t s = 0; s < 5; ++s) {
    cpu_terms.push_back(native::reshape(term<float>(s + 10, 4096, kFloat32), {64, 64}));
    gpu_terms.push_back(native::to(cpu_terms.back(), kGpu));
  }
  cpu_terms.emplace_back();  // an undefined term counts as zeros
  gpu_terms.emplace_back();
  const Tensor a = parallel::detail::exact_sum(cpu_terms, 8, 8.0, Device::cpu());
  const Tensor b = parallel::detail::exact_sum(gpu_terms, 8, 8.0, kGpu);
  ASSERT_EQ(b.device(), kGpu);
  EXPECT_TRUE(same_bytes(a.to_vector<float>(), native::to(b, Device::cpu()).to_vector<float>()));
  EXPECT_THROW(parallel::detail::exact_sum({gpu_terms[0], cpu_terms[1]}, 2, 2.0, kGpu), DeviceError);
}

using parallel::test::Bits;
using parallel::test::same_bits;

// Three Adam steps of deterministic_shards_util.h's shard-loss run with the model on the GPU.
Bits train(const std::vector<Device>& devices) { return parallel::test::train_shard_losses(devices, 3, kGpu); }

TEST(DataParallelDeterministicCuda, SameBitsForEveryReplicaLayoutAndTheReducer) {
  EMBER_REQUIRE_CUDA();
  const Bits reducer = train({});
  const Bits one = train({kGpu});
  EXPECT_TRUE(same_bits(reducer, one)) << "one replica against the group-less reducer";
  std::vector<std::vector<Device>> layouts = {{kGpu, kGpu}};
  std::vector<Device> all;
  for (int d = 0; d < cuda_device_count(); ++d) all.push_back(Device::cuda(d));
  if (all.size() > 1) layouts.push_back(all);
  for (const auto& devices : layouts) EXPECT_TRUE(same_bits(one, train(devices))) << devices.size() << " replicas";
}

}  // namespace
