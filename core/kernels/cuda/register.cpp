// register_cuda_kernels(): every CUDA kernel, by its op's stub (Note [Dispatch stubs]). Plain
// C++: the kernels' host entry points are declared in core/kernels/cuda/kernels.h.
#include "core/kernels/cuda/register.h"

#include "core/config.h"
#include "core/cuda/cublas_gemm.h"
#include "core/kernels/cuda/kernels.h"
#include "core/kernels/cuda/rnn.h"
#include "core/ops/class_loss_stubs.h"
#include "core/ops/copy_stubs.h"
#include "core/ops/cumsum_stubs.h"
#include "core/ops/fixed_point_stubs.h"
#include "core/ops/elementwise_stubs.h"
#include "core/ops/index_stubs.h"
#include "core/ops/linalg_stubs.h"
#include "core/ops/multi_tensor_stubs.h"
#include "core/ops/nn_layers_stubs.h"
#include "core/ops/random_stubs.h"
#include "core/ops/reduce_stubs.h"
#include "core/ops/rnn_stubs.h"
#include "core/ops/softmax_stubs.h"

namespace ember::kernels::cuda {

void register_cuda_kernels() {
  constexpr DeviceType kCuda = DeviceType::CUDA;
  native::binary_stub.set(kCuda, &ember::cuda::binary);
  native::unary_stub.set(kCuda, &ember::cuda::unary);
  native::ternary_stub.set(kCuda, &ember::cuda::ternary);
  native::cast_stub.set(kCuda, &ember::cuda::cast);
  native::copy_bytes_stub.set(kCuda, &ember::cuda::copy_bytes);
  native::reduce_stub.set(kCuda, &ember::cuda::reduce);
  native::first_bad_target_stub.set(kCuda, &ember::cuda::first_bad_target);
  native::class_loss_forward_stub.set(kCuda, &ember::cuda::class_loss_forward);
  native::class_loss_backward_stub.set(kCuda, &ember::cuda::class_loss_backward);
  native::softmax_stub.set(kCuda, &ember::cuda::softmax);
  native::softmax_backward_stub.set(kCuda, &ember::cuda::softmax_backward);
  native::index_first_out_of_range_stub.set(kCuda, &ember::cuda::index_first_out_of_range);
  native::index_gather_stub.set(kCuda, &ember::cuda::index_gather);
  native::index_scatter_add_stub.set(kCuda, &ember::cuda::index_scatter_add);
  native::one_hot_stub.set(kCuda, &ember::cuda::one_hot);
  native::random_stub.set(kCuda, &ember::cuda::random);
  native::first_invalid_probability_stub.set(kCuda, &ember::cuda::first_invalid_probability);
  native::multi_tensor_adam_stub.set(kCuda, &ember::cuda::multi_tensor_adam);
  native::multi_tensor_sgd_stub.set(kCuda, &ember::cuda::multi_tensor_sgd);
  native::multi_tensor_norm_stub.set(kCuda, &ember::cuda::multi_tensor_norm);
  native::multi_tensor_scale_stub.set(kCuda, &ember::cuda::multi_tensor_scale);
  native::gather_rows_stub.set(kCuda, &ember::cuda::gather_rows);
  native::embedding_forward_stub.set(kCuda, &ember::cuda::embedding_forward);
  native::embedding_backward_scratch_bytes_stub.set(kCuda, &ember::cuda::embedding_backward_scratch_bytes);
  native::embedding_backward_stub.set(kCuda, &ember::cuda::embedding_backward);
  native::layer_norm_forward_stub.set(kCuda, &ember::cuda::layer_norm_forward);
  native::layer_norm_backward_stub.set(kCuda, &ember::cuda::layer_norm_backward);
  native::rnn_layer_forward_stub.set(kCuda, &ember::cuda::rnn_layer_forward);
  native::rnn_layer_backward_stub.set(kCuda, &ember::cuda::rnn_layer_backward);
  native::gemm_stub.set(kCuda, &ember::cuda::gemm);
  native::cumsum_stub.set(kCuda, &ember::cuda::cumsum);
  native::fixed_point_max_abs_stub.set(kCuda, &ember::cuda::fixed_point_max_abs);
  native::fixed_point_accumulate_stub.set(kCuda, &ember::cuda::fixed_point_accumulate);
  native::fixed_point_to_float_stub.set(kCuda, &ember::cuda::fixed_point_to_float);
#if EMBER_HAVE_CUDNN
  native::cudnn_rnn_forward_stub.set(kCuda, &ember::cuda::cudnn_rnn_forward);
  native::cudnn_rnn_backward_stub.set(kCuda, &ember::cuda::cudnn_rnn_backward);
#endif
}

}  // namespace ember::kernels::cuda
