// register_cuda_kernels(): every CUDA kernel, by its op's stub (Note [Dispatch stubs]). Plain
// C++: the kernels' host entry points are declared in core/kernels/cuda/kernels.h.
#include "core/kernels/cuda/register.h"

#include "core/kernels/cuda/kernels.h"
#include "core/ops/class_loss_stubs.h"
#include "core/ops/copy_stubs.h"
#include "core/ops/elementwise_stubs.h"
#include "core/ops/reduce_stubs.h"
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
}

}  // namespace ember::kernels::cuda
