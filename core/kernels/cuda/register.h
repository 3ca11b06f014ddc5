// register_cuda_kernels(): fills the CUDA slot of every op's DispatchStub (Note [Dispatch stubs]
// in core/ops/detail/dispatch_stub.h). Called once by register_cuda_backend(). Plain C++.
#pragma once

namespace ember::kernels::cuda {

void register_cuda_kernels();

}  // namespace ember::kernels::cuda
