// register_cpu_kernels(): every CPU kernel, by its op's stub (Note [Dispatch stubs]).
#include "core/kernels/cpu/register.h"

#include "core/kernels/cpu/class_loss.h"
#include "core/kernels/cpu/elementwise.h"
#include "core/kernels/cpu/reduce.h"
#include "core/kernels/cpu/softmax.h"
#include "core/ops/class_loss_stubs.h"
#include "core/ops/elementwise_stubs.h"
#include "core/ops/reduce_stubs.h"
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
}

}  // namespace ember::kernels::cpu
