// cuDNN handles per device and host thread (a per-device pool, as PyTorch's handle pool) and
// the error reporting behind EMBER_CUDNN_CHECK.
#include <array>
#include <mutex>
#include <string>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "core/cuda/cudnn_check.h"
#include "core/device.h"
#include "core/error.h"

namespace ember::cuda {
namespace detail {

void throw_cudnn_error(cudnnStatus_t status, const char* expr, const char* file, int line) {
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) (void)cudaGetLastError();
  const std::string device = dev < 0 ? "cuda:?" : "cuda:" + std::to_string(dev);
  if (status == CUDNN_STATUS_ALLOC_FAILED) {
    ::ember::detail::throw_error<OutOfMemoryError>(file, line, "cuDNN error: ", cudnnGetErrorString(status), " (",
                                                   static_cast<int>(status), ") in `", expr, "` on ", device);
  }
  ::ember::detail::throw_error<Error>(file, line, "cuDNN error: ", cudnnGetErrorString(status), " (",
                                      static_cast<int>(status), ") in `", expr, "` on ", device);
}

}  // namespace detail

namespace {

struct HandlePool {
  std::mutex mu;
  std::vector<cudnnHandle_t> free;  // guarded by mu
};
std::array<HandlePool, kMaxDevicesPerType> g_pools;

// The handles this thread holds; they go back to their pools when the thread ends.
struct ThreadHandles {
  std::array<cudnnHandle_t, kMaxDevicesPerType> handles{};
  ~ThreadHandles() {
    for (size_t i = 0; i < handles.size(); ++i) {
      if (handles[i] == nullptr) continue;
      std::lock_guard<std::mutex> lock(g_pools[i].mu);
      g_pools[i].free.push_back(handles[i]);
    }
  }
};

}  // namespace

cudnnHandle_t cudnn_handle(int device_index) {
  EMBER_CHECK(device_index >= 0 && device_index < kMaxDevicesPerType, "cudnn: CUDA device index ", device_index,
              " is out of range");
  thread_local ThreadHandles mine;
  cudnnHandle_t& h = mine.handles[static_cast<size_t>(device_index)];
  if (h == nullptr) {
    HandlePool& pool = g_pools[static_cast<size_t>(device_index)];
    {
      std::lock_guard<std::mutex> lock(pool.mu);
      if (!pool.free.empty()) {
        h = pool.free.back();
        pool.free.pop_back();
      }
    }
    if (h == nullptr) EMBER_CUDNN_CHECK(cudnnCreate(&h));
  }
  EMBER_CUDNN_CHECK(cudnnSetStream(h, current_stream(device_index)));
  return h;
}

}  // namespace ember::cuda
