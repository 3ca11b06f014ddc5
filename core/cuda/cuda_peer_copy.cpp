// CUDA's PeerCopyOps (core/cuda/cuda_peer_copy.h); the sequence they run in is
// native::detail::copy_between_devices, see Note [Copies between devices].
#include "core/cuda/cuda_peer_copy.h"

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_device.h"
#include "core/cuda/cuda_stream.h"
#include "core/stream.h"

namespace ember::cuda {
namespace {

class CudaPeerCopyOps final : public native::detail::PeerCopyOps {
 public:
  void* record_event(int device_index, uint64_t stream) const override {
    // An event belongs to the device current at its creation and can only be recorded on that
    // device's streams; stream 0 is the current device's legacy default stream.
    CudaDeviceGuard guard(device_index);
    cudaEvent_t event = nullptr;
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    const cudaError_t recorded = cudaEventRecord(event, to_cuda_stream(stream));
    if (recorded != cudaSuccess) {
      (void)cudaEventDestroy(event);  // the record's error is the one to report
      EMBER_CUDA_CHECK(recorded);
    }
    return event;
  }

  void wait_event(int device_index, uint64_t stream, void* event) const override {
    CudaDeviceGuard guard(device_index);  // the waiting stream's device (the event may be another's)
    EMBER_CUDA_CHECK(cudaStreamWaitEvent(to_cuda_stream(stream), static_cast<cudaEvent_t>(event), 0));
  }

  void destroy_event(void* event) const override {
    EMBER_CUDA_CHECK(cudaEventDestroy(static_cast<cudaEvent_t>(event)));
  }

  void copy(void* dst, int dst_device, const void* src, int src_device, size_t num_bytes, int stream_device,
            uint64_t stream) const override {
    // cudaMemcpyPeerAsync works with or without peer access enabled (without it, staged by the
    // driver) and is ordered only on `stream`.
    CudaDeviceGuard guard(stream_device);
    EMBER_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, num_bytes, to_cuda_stream(stream)));
  }

  void synchronize(int device_index, uint64_t stream) const override {
    ember::detail::cuda_stream_synchronize(device_index, stream);
  }
};

}  // namespace

const native::detail::PeerCopyOps& cuda_peer_copy_ops() {
  static const CudaPeerCopyOps ops;
  return ops;
}

}  // namespace ember::cuda
