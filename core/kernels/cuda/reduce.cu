// The CUDA reduction kernels over kernels::ReducePlan, stepping kernels::Reducer, the functor
// the CPU kernel (core/kernels/cpu/reduce.cpp) uses, with the same accumulator types (double for
// floating inputs, int64 for integral and bool). Two launch shapes, chosen by plan geometry:
//  * many outputs: one thread per output walks its reduced elements (neighbouring threads
//    read neighbouring outputs, which coalesces when the kept dims are innermost);
//  * few outputs with long reductions: one block per output; each thread reduces a contiguous
//    run of reduced indices, and the runs are combined pairwise in index order, so
//    first-occurrence ties and NaN propagation come out exactly as the CPU's sequential walk.
#include <type_traits>

#include "core/cuda/cuda_device.h"
#include "core/kernels/cuda/kernels.h"
#include "core/kernels/cuda/loops.cuh"

namespace ember::cuda {
namespace {
using kernels::AccIdx;
using kernels::ReduceKind;
using kernels::ReducePlan;
using kernels::Reducer;

constexpr int64_t kBlockPerOutputMinReduced = 256;   // reductions at least this long ...
constexpr int64_t kBlockPerOutputMaxOutputs = 16384;  // ... with at most this many outputs

__device__ __forceinline__ bool is_arg_op(ReduceKind op) {
  return op == ReduceKind::kMax || op == ReduceKind::kMin || op == ReduceKind::kArgMax || op == ReduceKind::kArgMin;
}

// Steps `acc` over reduced indices [begin, end) of the output at `base`. The innermost reduced
// dim is walked without division, as the CPU driver does.
template <typename T, typename Acc>
__device__ __forceinline__ void reduce_range(const Reducer<T, Acc>& r, const ReducePlan& p, const T* base,
                                             int64_t begin, int64_t end, AccIdx<Acc>& acc) {
  const int64_t inner = p.red_ndim ? p.red_sizes[p.red_ndim - 1] : 1;
  const int64_t inner_stride = p.red_ndim ? p.red_strides[p.red_ndim - 1] : 0;
  int64_t j = begin;
  while (j < end) {
    const int64_t row_start = j - j % inner;
    const T* row = base + p.red_offset(row_start);  // innermost index 0 of this row
    const int64_t stop = end < row_start + inner ? end : row_start + inner;
    for (; j < stop; ++j) r.step(acc, row[(j - row_start) * inner_stride], j);
  }
}

template <typename Acc, typename Out>
__device__ __forceinline__ void write_result(const AccIdx<Acc>& acc, int64_t o, Out* out, int64_t* out_idx,
                                             ReduceKind op, double scale) {
  if (out) out[o] = static_cast<Out>(static_cast<double>(acc.v) * scale);
  if (out_idx && is_arg_op(op)) out_idx[o] = acc.i < 0 ? 0 : acc.i;
}

template <typename T, typename Acc, typename Out>
__global__ void __launch_bounds__(kBlockThreads)
    reduce_thread_per_output(ReducePlan p, const T* in, Out* out, int64_t* out_idx, ReduceKind op, double scale) {
  const Reducer<T, Acc> r{op};
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < p.out_numel; o += stride) {
    AccIdx<Acc> acc = r.init();
    reduce_range(r, p, in + p.out_offset(o), 0, p.red_numel, acc);
    write_result(acc, o, out, out_idx, op, scale);
  }
}

template <typename T, typename Acc, typename Out>
__global__ void __launch_bounds__(kBlockThreads)
    reduce_block_per_output(ReducePlan p, const T* in, Out* out, int64_t* out_idx, ReduceKind op, double scale) {
  __shared__ AccIdx<Acc> partial[kBlockThreads];
  const Reducer<T, Acc> r{op};
  const Reducer<Acc, Acc> combine{op};  // folds one run's accumulator into the run before it
  const int t = static_cast<int>(threadIdx.x);
  const int64_t run = (p.red_numel + blockDim.x - 1) / blockDim.x;
  const int64_t begin = t * run < p.red_numel ? t * run : p.red_numel;
  const int64_t end = begin + run < p.red_numel ? begin + run : p.red_numel;
  for (int64_t o = blockIdx.x; o < p.out_numel; o += gridDim.x) {
    AccIdx<Acc> acc = r.init();
    reduce_range(r, p, in + p.out_offset(o), begin, end, acc);
    partial[t] = acc;
    __syncthreads();
    // partial[t] covers runs [t, t + 2s) after the step with stride s: index order is kept.
    for (int s = 1; s < static_cast<int>(blockDim.x); s <<= 1) {
      if (t % (2 * s) == 0 && t + s < static_cast<int>(blockDim.x)) {
        const AccIdx<Acc> next = partial[t + s];
        if (next.i >= 0) combine.step(partial[t], next.v, next.i);  // i < 0: an empty run (arg ops)
      }
      __syncthreads();
    }
    if (t == 0) write_result(partial[0], o, out, out_idx, op, scale);
    __syncthreads();  // partial[0] is read before the next output overwrites it
  }
}

template <typename T>
constexpr bool is_float_v = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

}  // namespace

void reduce(ReduceKind op, DType in_dtype, DType out_dtype, const ReducePlan& plan, const void* in, void* out,
            int64_t* out_idx, double scale, int device_index, const char* /*name*/) {
  if (plan.out_numel == 0) return;
  CudaDeviceGuard guard(device_index);
  const cudaStream_t stream = current_stream(device_index);
  const bool block_per_output =
      plan.red_numel >= kBlockPerOutputMinReduced && plan.out_numel <= kBlockPerOutputMaxOutputs;
  EMBER_DISPATCH_ALL(in_dtype, "reduce", [&] {
    using T = scalar_t;
    using Acc = std::conditional_t<is_float_v<T>, double, int64_t>;
    EMBER_DISPATCH_ALL(out_dtype, "reduce", [&] {
      const T* src = static_cast<const T*>(in);
      scalar_t* dst = static_cast<scalar_t*>(out);
      if (block_per_output) {
        const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(plan.out_numel, kMaxBlocks));
        reduce_block_per_output<T, Acc, scalar_t>
            <<<blocks, kBlockThreads, 0, stream>>>(plan, src, dst, out_idx, op, scale);
        detail::after_launch("reduce_block_per_output", stream);
      } else {
        reduce_thread_per_output<T, Acc, scalar_t>
            <<<num_blocks(plan.out_numel), kBlockThreads, 0, stream>>>(plan, src, dst, out_idx, op, scale);
        detail::after_launch("reduce_thread_per_output", stream);
      }
    });
  });
}

}  // namespace ember::cuda
