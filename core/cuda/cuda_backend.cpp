// register_cuda_backend(): installs cudaMalloc/cudaFree as the caching allocator's raw memory
// for DeviceType::CUDA and fills the CUDA kernels table of core/ops/detail/plan.h. The table's
// entries pick the device from the operands, make it current and call the launchers in
// kernels.h, cuBLAS (cublas_gemm.cpp) or cudaMemcpy.
#include "core/cuda/cuda_backend.h"

#include <cstring>
#include <mutex>

#include "core/allocator.h"
#include "core/config.h"
#include "core/cuda/cublas_gemm.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_device.h"
#include "core/cuda/cuda_memory.h"
#include "core/cuda/cuda_peer_copy.h"
#include "core/cuda/cuda_stream.h"
#include "core/cuda/kernels.h"
#include "core/ops/detail/peer_copy.h"
#include "core/ops/detail/plan.h"
#include "core/stream.h"

namespace ember {
namespace cuda {
namespace {

using native::detail::CudaKernels;

}  // namespace
#if EMBER_HAVE_CUDNN
const native::detail::CudnnRnnBackend* cudnn_rnn_backend();  // cudnn_rnn.cpp
#endif
namespace {

// Every operand of a plan is on one device (checked by the ops); the output decides. The plan
// carries its index, so no op asks the driver where a pointer lives.
int plan_device(const kernels::ElementwisePlan& plan) { return plan.device_index; }

void binary(kernels::BinaryOp op, double alpha, DType dtype, const kernels::ElementwisePlan& plan) {
  if (plan.numel == 0) return;
  CudaDeviceGuard guard(plan_device(plan));
  launch_binary(op, alpha, dtype, plan);
}

void unary(kernels::UnaryOp op, double a, double b, DType dtype, const kernels::ElementwisePlan& plan) {
  if (plan.numel == 0) return;
  CudaDeviceGuard guard(plan_device(plan));
  launch_unary(op, a, b, dtype, plan);
}

void ternary(kernels::TernaryOp op, double value, DType dtype, const kernels::ElementwisePlan& plan) {
  if (plan.numel == 0) return;
  CudaDeviceGuard guard(plan_device(plan));
  launch_ternary(op, value, dtype, plan);
}

void cast(DType to, DType from, const kernels::ElementwisePlan& plan) {
  if (plan.numel == 0) return;
  CudaDeviceGuard guard(plan_device(plan));
  const int64_t es = static_cast<int64_t>(element_size(to));
  if (to == from && plan.ndim == 1 && plan.strides[0][0] == es && plan.strides[1][0] == es) {
    // A dense same-dtype copy on one device.
    EMBER_CUDA_CHECK(cudaMemcpyAsync(plan.data[0], plan.data[1], static_cast<size_t>(plan.numel * es),
                                     cudaMemcpyDeviceToDevice, current_stream(plan.device_index)));
    return;
  }
  launch_cast(to, from, plan);
}

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

void reduce(kernels::ReduceOp op, DType in_dtype, DType out_dtype, const kernels::ReducePlan& plan, const void* in,
            void* out, int64_t* out_idx, double scale, int device_index) {
  if (plan.out_numel == 0) return;
  CudaDeviceGuard guard(device_index);
  launch_reduce(op, in_dtype, out_dtype, plan, in, out, out_idx, scale, device_index);
}

void synchronize(int device_index) {
  CudaDeviceGuard guard(device_index);
  EMBER_CUDA_CHECK(cudaDeviceSynchronize());
}

CudaKernels g_kernels{
    .binary = &binary,
    .unary = &unary,
    .ternary = &ternary,
    .cast = &cast,
    .copy_bytes = &copy_bytes,
    .gemm = &gemm,
    .synchronize = &synchronize,
    .reduce = &reduce,
    .index_first_out_of_range = &index_first_out_of_range,
    .first_invalid_probability = &first_invalid_probability,
    .index_gather = &index_gather,
    .index_scatter_add = &index_scatter_add,
    .one_hot = &one_hot,
    .softmax = &softmax,
    .softmax_backward = &softmax_backward,
    .random = &random,
    .first_bad_target = &first_bad_target,
    .class_loss_forward = &class_loss_forward,
    .class_loss_backward = &class_loss_backward,
    .multi_tensor_adam = &multi_tensor_adam,
    .multi_tensor_sgd = &multi_tensor_sgd,
    .multi_tensor_norm = &multi_tensor_norm,
    .multi_tensor_scale = &multi_tensor_scale,
    .gather_rows = &gather_rows,
    .embedding_forward = &embedding_forward,
    .embedding_backward_scratch_bytes = &embedding_backward_scratch_bytes,
    .embedding_backward = &embedding_backward,
    .layer_norm_forward = &layer_norm_forward,
    .layer_norm_backward = &layer_norm_backward,
    .rnn_cell_f32 = &rnn_cell_f32,
    .rnn_cell_f64 = &rnn_cell_f64,
#if EMBER_HAVE_CUDNN
    .cudnn_rnn = cudnn_rnn_backend(),
#else
    .cudnn_rnn = nullptr,
#endif
};

}  // namespace
}  // namespace cuda

namespace detail {

void register_cuda_backend() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_raw_memory_backend(DeviceType::CUDA, cuda::cuda_raw_memory_backend());
    register_pinned_memory_backend(cuda::cuda_pinned_memory_backend());
    native::detail::set_cuda_kernels(&cuda::g_kernels);
  });
}

}  // namespace detail
}  // namespace ember
