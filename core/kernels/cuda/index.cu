// CUDA launchers of the indexing ops and of the pre-launch value checks: dtype dispatch onto the
// functors of core/kernels/index.h, run by launch_elements (launch.cuh). No indexing formula
// lives here; the CPU tests run the same functors on an emulated launch grid.
#include <string>

#include "core/cuda/cuda_device.h"
#include "core/deterministic.h"
#include "core/kernels/cuda/kernels.h"
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/class_loss.h"
#include "core/kernels/index.h"

namespace ember::cuda {
namespace {

template <typename Pred>
int64_t first_failure(const char* name, const Pred& ok, int64_t n, void* slot, int device_index) {
  if (n <= 0) return -1;
  CudaDeviceGuard guard(device_index);
  const cudaStream_t stream = current_stream(device_index);
  auto* first = static_cast<unsigned long long*>(slot);
  EMBER_CUDA_CHECK(cudaMemsetAsync(first, 0xff, sizeof(unsigned long long), stream));  // kNoFailure
  launch_elements(name, n, kernels::FirstFailureF<Pred>{ok, first}, device_index);
  unsigned long long host = 0;
  EMBER_CUDA_CHECK(cudaMemcpyAsync(&host, first, sizeof(host), cudaMemcpyDeviceToHost, stream));
  EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host == kernels::kNoFailure ? -1 : static_cast<int64_t>(host);
}

}  // namespace

int64_t index_first_out_of_range(const int64_t* idx, int64_t n, int64_t size, bool allow_negative, void* slot,
                                 int device_index) {
  return first_failure("index_bounds_check", kernels::IndexInRange{idx, size, allow_negative}, n, slot,
                       device_index);
}

int64_t first_invalid_probability(DType dtype, const void* p, int64_t n, void* slot, int device_index) {
  return EMBER_DISPATCH_FLOATING(dtype, "bernoulli", [&]() -> int64_t {
    return first_failure("probability_check", kernels::ProbabilityInRange<scalar_t>{static_cast<const scalar_t*>(p)},
                         n, slot, device_index);
  });
}

int64_t first_bad_target(const int64_t* target, int64_t n, int64_t num_classes, int64_t ignore_index, void* slot,
                         int device_index) {
  return first_failure("target_check", kernels::TargetInRange{target, num_classes, ignore_index}, n, slot,
                       device_index);
}

void index_gather(DType dtype, const kernels::IndexGeometry& g, const int64_t* idx, const void* in, void* out,
                  int device_index) {
  int64_t n = 1;
  for (int d = 0; d < g.ndim; ++d) n *= g.sizes[d];
  CudaDeviceGuard guard(device_index);
  EMBER_DISPATCH_ALL(dtype, "gather", [&] {
    launch_elements("gather", n,
                    kernels::GatherF<scalar_t>{g, idx, static_cast<const scalar_t*>(in), static_cast<scalar_t*>(out)},
                    device_index);
  });
}

void index_scatter_add(DType dtype, const kernels::IndexGeometry& g, const int64_t* idx, const void* src, void* self,
                       const char* op, int device_index) {
  if (is_floating_point(dtype) && are_deterministic_algorithms_enabled()) {
    alert_not_deterministic((std::string(op) + " (CUDA, floating point: atomic adds)").c_str());
  }
  int64_t n = 1;
  for (int d = 0; d < g.ndim; ++d) n *= g.sizes[d];
  CudaDeviceGuard guard(device_index);
  auto launch = [&]<typename T>(T*) {
    launch_elements("scatter_add", n, kernels::ScatterAddF<T>{g, idx, static_cast<const T*>(src), static_cast<T*>(self)},
                    device_index);
  };
  // 16-bit floats too (autocast reaches gather's backward, Embedding's and index_select's): see
  // Note [16-bit atomic add] in core/kernels/atomic.h.
  if (dtype == DType::BFloat16) return launch(static_cast<BFloat16*>(nullptr));
  if (dtype == DType::Float16) return launch(static_cast<Half*>(nullptr));
  EMBER_DISPATCH_NUMERIC(dtype, op, [&] { launch(static_cast<scalar_t*>(nullptr)); });
}

void one_hot(const int64_t* idx, int64_t n, int64_t num_classes, int64_t* out, int device_index) {
  CudaDeviceGuard guard(device_index);
  launch_elements("one_hot", n, kernels::OneHotF{idx, num_classes, out}, device_index);
}

}  // namespace ember::cuda
