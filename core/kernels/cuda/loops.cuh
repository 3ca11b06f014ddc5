// The CUDA element-wise driver: a grid-stride kernel that runs a functor from
// core/kernels/elementwise.h over an ElementwisePlan, using the plan's own index arithmetic
// (ElementwisePlan::offsets), so CPU and CUDA share both the math and the indexing.
// Launches go to the current stream of the plan's device (Note [Current stream]) and are
// checked as in Note [CUDA error reporting]; include from .cu files only.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_stream.h"
#include "core/kernels/loops.h"

namespace ember::cuda {

constexpr int kBlockThreads = 256;
constexpr int64_t kMaxBlocks = int64_t(1) << 16;  // grid-stride beyond 16M threads

inline unsigned num_blocks(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kBlockThreads - 1) / kBlockThreads, 1, kMaxBlocks));
}

template <typename Out, typename... Ins, typename F, size_t... I>
__device__ __forceinline__ void apply_at(const kernels::ElementwisePlan& p, const int64_t* off, const F& f,
                                         std::index_sequence<I...>) {
  *reinterpret_cast<Out*>(p.data[0] + off[0]) =
      static_cast<Out>(f(*reinterpret_cast<const Ins*>(p.data[I + 1] + off[I + 1])...));
}

// (nvcc wants a __global__ template's pack last, hence <Out, F, Ins...>.)
template <typename Out, typename F, typename... Ins>
__global__ void __launch_bounds__(kBlockThreads) elementwise_kernel(kernels::ElementwisePlan p, F f) {
  constexpr int kOperands = 1 + static_cast<int>(sizeof...(Ins));
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  int64_t off[kernels::kMaxOperands];
  if (p.ndim == 1) {  // coalesced to one dimension (the dense case): no division per element
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.numel; i += stride) {
#pragma unroll
      for (int k = 0; k < kOperands; ++k) off[k] = i * p.strides[k][0];
      apply_at<Out, Ins...>(p, off, f, std::index_sequence_for<Ins...>{});
    }
  } else {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.numel; i += stride) {
      p.offsets(i, off);
      apply_at<Out, Ins...>(p, off, f, std::index_sequence_for<Ins...>{});
    }
  }
}

/// out[i] = f(in_0[i], ..., in_k[i]) over the plan; operand 0 is Out, operand j+1 is Ins[j].
/// The CUDA twin of kernels::cpu::cpu_kernel. Asynchronous; launch errors throw Error naming `name`.
template <typename Out, typename... Ins, typename F>
void cuda_kernel(const kernels::ElementwisePlan& p, const F& f, const char* name = "elementwise") {
  static_assert(1 + sizeof...(Ins) <= kernels::kMaxOperands, "too many operands");
  if (p.numel == 0) return;
  const cudaStream_t stream = current_stream(p.device_index);
  elementwise_kernel<Out, F, Ins...><<<num_blocks(p.numel), kBlockThreads, 0, stream>>>(p, f);
  detail::after_launch(name, stream);
}

}  // namespace ember::cuda
