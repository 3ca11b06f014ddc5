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
#include "core/kernels/cuda/kernels.h"
#include "core/kernels/cuda/register.h"
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

CudaKernels g_kernels{
    .gemm = &gemm,
    .index_first_out_of_range = &index_first_out_of_range,
    .first_invalid_probability = &first_invalid_probability,
    .index_gather = &index_gather,
    .index_scatter_add = &index_scatter_add,
    .one_hot = &one_hot,
    .random = &random,
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
    kernels::cuda::register_cuda_kernels();
  });
}

}  // namespace detail
}  // namespace ember
