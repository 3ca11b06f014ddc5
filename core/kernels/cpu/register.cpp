// register_cpu_kernels(): every CPU kernel, by its op's stub (Note [Dispatch stubs]).
#include "core/kernels/cpu/register.h"

#include "core/kernels/cpu/blas_gemm.h"
#include "core/kernels/cpu/class_loss.h"
#include "core/kernels/cpu/cumsum.h"
#include "core/kernels/cpu/fixed_point.h"
#include "core/kernels/cpu/elementwise.h"
#include "core/kernels/cpu/embedding.h"
#include "core/kernels/cpu/gather_rows.h"
#include "core/kernels/cpu/index.h"
#include "core/kernels/cpu/layer_norm.h"
#include "core/kernels/cpu/norm.h"
#include "core/kernels/cpu/optim.h"
#include "core/kernels/cpu/random.h"
#include "core/kernels/cpu/reduce.h"
#include "core/kernels/cpu/rnn_layer.h"
#include "core/kernels/cpu/softmax.h"
#include "core/ops/class_loss_stubs.h"
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

namespace ember::kernels::cpu {

void register_cpu_kernels() {
  constexpr DeviceType kCpu = DeviceType::CPU;
  native::binary_stub.set(kCpu, &binary_kernel);
  native::unary_stub.set(kCpu, &unary_kernel);
  native::ternary_stub.set(kCpu, &ternary_kernel);
  native::cast_stub.set(kCpu, &cast_kernel);
  native::reduce_stub.set(kCpu, &reduce_kernel);
  native::first_bad_target_stub.set(kCpu, &first_bad_target);
  native::class_loss_forward_stub.set(kCpu, &class_loss_forward);
  native::class_loss_backward_stub.set(kCpu, &class_loss_backward);
  native::softmax_stub.set(kCpu, &softmax_forward);
  native::softmax_backward_stub.set(kCpu, &softmax_backward);
  native::index_first_out_of_range_stub.set(kCpu, &index_first_out_of_range);
  native::index_gather_stub.set(kCpu, &index_gather);
  native::index_scatter_add_stub.set(kCpu, &index_scatter_add);
  native::one_hot_stub.set(kCpu, &one_hot);
  native::random_stub.set(kCpu, &random_fill);
  native::first_invalid_probability_stub.set(kCpu, &first_invalid_probability);
  native::multi_tensor_adam_stub.set(kCpu, &multi_tensor_adam);
  native::multi_tensor_sgd_stub.set(kCpu, &multi_tensor_sgd);
  native::multi_tensor_norm_stub.set(kCpu, &multi_tensor_norm);
  native::multi_tensor_scale_stub.set(kCpu, &multi_tensor_scale);
  native::gather_rows_stub.set(kCpu, &gather_rows);
  native::embedding_forward_stub.set(kCpu, &embedding_forward);
  native::embedding_backward_scratch_bytes_stub.set(kCpu, &embedding_backward_scratch_bytes);
  native::embedding_backward_stub.set(kCpu, &embedding_backward);
  native::layer_norm_forward_stub.set(kCpu, &layer_norm_forward);
  native::layer_norm_backward_stub.set(kCpu, &layer_norm_backward);
  native::rnn_layer_forward_stub.set(kCpu, &rnn_layer_forward);
  native::rnn_layer_backward_stub.set(kCpu, &rnn_layer_backward);
  native::gemm_stub.set(kCpu, &blas_gemm);
  native::cumsum_stub.set(kCpu, &cumsum);
  native::fixed_point_max_abs_stub.set(kCpu, &fixed_point_max_abs);
  native::fixed_point_accumulate_stub.set(kCpu, &fixed_point_accumulate);
  native::fixed_point_to_float_stub.set(kCpu, &fixed_point_to_float);
}

}  // namespace ember::kernels::cpu
