// CUDA kernels of the exact fixed-point sums (core/ops/fixed_point_stubs.h): the per-element
// functors of core/kernels/fixed_point.h through launch_elements, the very bodies the CPU driver
// and the emulated launch grid run, and the max of FixedPointAbsF with one CUB reduction (a max
// is exact in any order, so the result equals the CPU's). Each makes cuda:device_index current
// and queues on its current stream; fixed_point_max_abs waits for its result.
#include <cub/device/device_reduce.cuh>
#include <thrust/iterator/transform_iterator.h>

#include "core/allocator.h"
#include "core/cuda/cuda_device.h"
#include "core/error.h"
#include "core/kernels/cuda/kernels.h"
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/fixed_point.h"

namespace ember::cuda {
namespace {

struct MaxF {
  EMBER_HOST_DEVICE double operator()(double a, double b) const { return a > b ? a : b; }
};

template <typename T>
double max_abs_typed(const T* x, int64_t n, int device_index) {
  const cudaStream_t stream = current_stream(device_index);
  const auto terms = thrust::make_transform_iterator(x, kernels::FixedPointAbsF<T>{});
  Allocator* alloc = get_allocator(Device::cuda(device_index));
  DataPtr result = alloc->allocate(sizeof(double));
  auto* out = static_cast<double*>(result.get());
  size_t temp_bytes = 0;
  EMBER_CUDA_CHECK(cub::DeviceReduce::Reduce(nullptr, temp_bytes, terms, out, n, MaxF{}, 0.0, stream));
  DataPtr temp = alloc->allocate(temp_bytes);
  EMBER_CUDA_CHECK(cub::DeviceReduce::Reduce(temp.get(), temp_bytes, terms, out, n, MaxF{}, 0.0, stream));
  detail::after_launch("fixed_point_max_abs", stream);
  double host = 0.0;
  EMBER_CUDA_CHECK(cudaMemcpyAsync(&host, out, sizeof(double), cudaMemcpyDeviceToHost, stream));
  EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

void check_dtype(DType dtype, const char* op) {
  EMBER_CHECK_T(TypeError, dtype == kFloat32 || dtype == kFloat64, op, ": expected float32 or float64, got ", dtype);
}

}  // namespace

double fixed_point_max_abs(DType dtype, const void* x, int64_t n, int device_index) {
  check_dtype(dtype, "fixed_point_max_abs");
  if (n == 0) return 0.0;
  CudaDeviceGuard guard(device_index);
  return dtype == kFloat32 ? max_abs_typed(static_cast<const float*>(x), n, device_index)
                           : max_abs_typed(static_cast<const double*>(x), n, device_index);
}

void fixed_point_accumulate(DType dtype, const void* x, int64_t* acc, int64_t n, int exponent, int device_index) {
  check_dtype(dtype, "fixed_point_accumulate_");
  CudaDeviceGuard guard(device_index);
  const kernels::Pow2Scale scale = kernels::make_pow2_scale(exponent);
  if (dtype == kFloat32) {
    launch_elements("fixed_point_accumulate_", n,
                    kernels::FixedPointAccumulateF<float>{static_cast<const float*>(x), acc, scale}, device_index);
  } else {
    launch_elements("fixed_point_accumulate_", n,
                    kernels::FixedPointAccumulateF<double>{static_cast<const double*>(x), acc, scale}, device_index);
  }
}

void fixed_point_to_float(DType dtype, const int64_t* acc, void* out, int64_t n, int exponent, double divisor,
                          int device_index) {
  check_dtype(dtype, "fixed_point_to_float_");
  CudaDeviceGuard guard(device_index);
  const kernels::Pow2Scale scale = kernels::make_pow2_scale(-exponent);
  if (dtype == kFloat32) {
    launch_elements("fixed_point_to_float_", n,
                    kernels::FixedPointToFloatF<float>{acc, static_cast<float*>(out), scale, divisor}, device_index);
  } else {
    launch_elements("fixed_point_to_float_", n,
                    kernels::FixedPointToFloatF<double>{acc, static_cast<double*>(out), scale, divisor}, device_index);
  }
}

}  // namespace ember::cuda
