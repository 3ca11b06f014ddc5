// register_cuda_backend(): installs cudaMalloc/cudaFree as the caching allocator's raw memory
// for DeviceType::CUDA (and the pinned host memory) and fills the ops' CUDA stubs
// (register_cuda_kernels(), core/kernels/cuda/register.cpp).
#include "core/cuda/cuda_backend.h"

#include <cstring>
#include <mutex>

#include "core/allocator.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_device.h"
#include "core/cuda/cuda_memory.h"
#include "core/cuda/cuda_peer_copy.h"
#include "core/cuda/cuda_stream.h"
#include "core/kernels/cuda/register.h"
#include "core/ops/detail/peer_copy.h"
#include "core/stream.h"

namespace ember {
namespace detail {

void register_cuda_backend() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_raw_memory_backend(DeviceType::CUDA, cuda::cuda_raw_memory_backend());
    register_pinned_memory_backend(cuda::cuda_pinned_memory_backend());
    kernels::cuda::register_cuda_kernels();
  });
}

}  // namespace detail
}  // namespace ember
