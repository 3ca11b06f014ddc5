// CUDA streams behind core/stream.h: the per-device pool of non-blocking streams (created on
// first use, never destroyed), stream synchronize/query, and current_stream() for launchers.
#include "core/cuda/cuda_stream.h"

#include <array>
#include <mutex>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_device.h"
#include "core/stream.h"
#include "core/thread_device.h"

namespace ember {
namespace cuda {

cudaStream_t current_stream(int device_index) {
  return to_cuda_stream(ember::current_stream(Device::cuda(device_index)).id());
}

}  // namespace cuda

namespace detail {
namespace {

struct Pool {
  std::mutex mu;
  std::array<uint64_t, kStreamPoolSize> streams{};  // guarded by mu; 0 until created
};
std::array<Pool, kMaxDevicesPerType> g_pools;

}  // namespace

uint64_t cuda_pool_stream(int device_index, int slot) {
  Pool& pool = g_pools[static_cast<size_t>(device_index)];
  std::lock_guard<std::mutex> lock(pool.mu);
  uint64_t& id = pool.streams[static_cast<size_t>(slot)];
  if (id == 0) {
    cuda::CudaDeviceGuard guard(device_index);
    cudaStream_t s = nullptr;
    EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    id = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(s));
  }
  return id;
}

void cuda_set_thread_device(int device_index) { EMBER_CUDA_CHECK(cudaSetDevice(device_index)); }

void cuda_stream_synchronize(int device_index, uint64_t id) {
  cuda::CudaDeviceGuard guard(device_index);
  EMBER_CUDA_CHECK(cudaStreamSynchronize(cuda::to_cuda_stream(id)));
}

bool cuda_stream_query(int device_index, uint64_t id) {
  cuda::CudaDeviceGuard guard(device_index);
  const cudaError_t err = cudaStreamQuery(cuda::to_cuda_stream(id));
  if (err == cudaErrorNotReady) return false;
  EMBER_CUDA_CHECK(err);
  return true;
}

}  // namespace detail
}  // namespace ember
