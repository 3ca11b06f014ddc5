// register_cpu_kernels(): every CPU kernel, by its op's stub (Note [Dispatch stubs]).
#include "core/kernels/cpu/register.h"

#include "core/kernels/cpu/elementwise.h"
#include "core/kernels/cpu/reduce.h"
#include "core/kernels/cpu/softmax.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/softmax.h"

namespace ember::kernels::cpu {

void register_cpu_kernels() {
  constexpr DeviceType kCpu = DeviceType::CPU;
  native::binary_stub.set(kCpu, &binary_kernel);
  native::unary_stub.set(kCpu, &unary_kernel);
  native::ternary_stub.set(kCpu, &ternary_kernel);
  native::cast_stub.set(kCpu, &cast_kernel);
  native::reduce_stub.set(kCpu, &reduce_kernel);
  native::softmax_stub.set(kCpu, &softmax_forward);
  native::softmax_backward_stub.set(kCpu, &softmax_backward);
}

}  // namespace ember::kernels::cpu
