// register_cpu_kernels(): fills the CPU slot of every op's DispatchStub (Note [Dispatch stubs] in
// core/ops/detail/dispatch_stub.h). Called once, at the first dispatch to a CPU kernel.
#pragma once

namespace ember::kernels::cpu {

void register_cpu_kernels();

}  // namespace ember::kernels::cpu
