// The CUDA kernel of copy_bytes_stub (core/ops/copy_stubs.h): copies with a CUDA side, on the current
// streams (Note [Current stream]); between two GPUs through the handshake of core/ops/detail/
// peer_copy.h.
#include <cstring>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_device.h"
#include "core/cuda/cuda_peer_copy.h"
#include "core/cuda/cuda_stream.h"
#include "core/kernels/cuda/kernels.h"
#include "core/ops/detail/peer_copy.h"
#include "core/stream.h"

namespace ember::cuda {
namespace {

// A copy with one CUDA side is queued on that device's current stream, ordered after the kernels
// that produced the source there and before later work on that stream (see Note [Copies between
// devices] for why this needs nothing more). One with a host side is waited for, so the caller may
// reuse or read host memory at once, unless `async`: pinned host memory whose block has the stream
// recorded (Note [Pinned host memory]). A same-device copy is not waited for, as any kernel.
void copy_on_stream(void* dst, const void* src, size_t num_bytes, cudaMemcpyKind kind, int device_index, bool async) {
  CudaDeviceGuard guard(device_index);
  const cudaStream_t stream = current_stream(device_index);
  EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, num_bytes, kind, stream));
  if (kind != cudaMemcpyDeviceToDevice && !async) EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
}

native::detail::CopyEnd copy_end(Device device) {
  return {device.index, ember::current_stream(device).id()};
}

}  // namespace

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t num_bytes, bool async) {
  if (num_bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, num_bytes);
  } else if (src_device.is_cpu()) {
    copy_on_stream(dst, src, num_bytes, cudaMemcpyHostToDevice, dst_device.index, async);
  } else if (dst_device.is_cpu()) {
    copy_on_stream(dst, src, num_bytes, cudaMemcpyDeviceToHost, src_device.index, async);
  } else if (dst_device.index == src_device.index) {
    copy_on_stream(dst, src, num_bytes, cudaMemcpyDeviceToDevice, dst_device.index, false);
  } else {
    // Between two GPUs: the two-way handshake of the current streams (Note [Copies between
    // devices]); `async` is the caller's non_blocking.
    native::detail::copy_between_devices(cuda_peer_copy_ops(), dst, copy_end(dst_device), src, copy_end(src_device),
                                         num_bytes, async);
  }
}

}  // namespace ember::cuda
