// CUDA launchers of the nn layer kernels behind core/ops/nn_layers.cpp: the packed-row gather
// (which is also Embedding's forward), Embedding's deterministic backward (a stable CUB radix
// sort of the indices, then one functor per sorted item: Note [Deterministic embedding
// backward] in core/kernels/embedding.h), and layer_norm (one thread per row; weight/bias
// gradients one thread per column). The formulas live in core/kernels/*.h, which the CPU tests
// also run on an emulated launch grid; this file only dispatches dtypes and launches on the
// current stream.
#include <cub/device/device_radix_sort.cuh>

#include "core/cuda/cuda_device.h"
#include "core/kernels/cuda/kernels.h"
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/embedding.h"
#include "core/kernels/gather_rows.h"
#include "core/kernels/layer_norm.h"

namespace ember::cuda {
namespace {

constexpr size_t kScratchAlign = 256;

size_t align_up(size_t n) { return (n + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

// Bits that hold every key in [0, num): the radix sort looks at no more.
int key_bits(int64_t num) {
  int bits = 1;
  while (bits < 63 && (int64_t{1} << bits) < num) ++bits;
  return bits;
}

// The CUB temporary storage for sorting n (key, position) pairs of key_bits(num) bits.
size_t sort_temp_bytes(int64_t n, int64_t num) {
  size_t bytes = 0;
  EMBER_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const unsigned long long*>(nullptr),
                                                   static_cast<unsigned long long*>(nullptr),
                                                   static_cast<const int64_t*>(nullptr), static_cast<int64_t*>(nullptr),
                                                   n, 0, key_bits(num)));
  return bytes;
}

}  // namespace

void gather_rows(DType dtype, const int64_t* index, int64_t out_rows, int64_t cols, const void* src, const void* fill,
                 void* out, int device_index) {
  CudaDeviceGuard guard(device_index);
  EMBER_DISPATCH_ALL(dtype, "gather_rows", [&] {
    launch_elements("gather_rows", out_rows * cols,
                    kernels::GatherRowsF<scalar_t>{index, cols, static_cast<const scalar_t*>(src),
                                                   static_cast<const scalar_t*>(fill), static_cast<scalar_t*>(out)},
                    device_index);
  });
}

void embedding_forward(DType dtype, const int64_t* idx, int64_t n, int64_t dim, const void* w, void* out,
                       int device_index) {
  CudaDeviceGuard guard(device_index);
  EMBER_DISPATCH_ALL(dtype, "embedding", [&] {
    launch_elements("embedding_forward", n * dim,
                    kernels::GatherRowsF<scalar_t>{idx, dim, static_cast<const scalar_t*>(w), nullptr,
                                                   static_cast<scalar_t*>(out)},
                    device_index);
  });
}

size_t embedding_backward_scratch_bytes(int64_t n, int64_t num_weights, int device_index) {
  if (n <= 0) return 0;
  CudaDeviceGuard guard(device_index);
  return 3 * align_up(static_cast<size_t>(n) * sizeof(int64_t)) + sort_temp_bytes(n, num_weights);
}

void embedding_backward(DType dtype, const int64_t* idx, int64_t n, int64_t num_weights, int64_t dim,
                        int64_t padding_idx, const void* g, void* gw, void* scratch, size_t scratch_bytes,
                        int device_index) {
  if (n <= 0 || dim <= 0) return;
  CudaDeviceGuard guard(device_index);
  const cudaStream_t stream = current_stream(device_index);
  char* base = static_cast<char*>(scratch);
  const size_t vec = align_up(static_cast<size_t>(n) * sizeof(int64_t));
  auto* keys = reinterpret_cast<int64_t*>(base);
  auto* pos_in = reinterpret_cast<int64_t*>(base + vec);
  auto* pos = reinterpret_cast<int64_t*>(base + 2 * vec);
  size_t temp_bytes = scratch_bytes - 3 * vec;
  launch_elements("embedding_backward_positions", n, kernels::IotaF{pos_in}, device_index);
  // Indices are checked to lie in [0, num_weights): as unsigned keys they sort the same.
  EMBER_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(base + 3 * vec, temp_bytes,
                                                   reinterpret_cast<const unsigned long long*>(idx),
                                                   reinterpret_cast<unsigned long long*>(keys), pos_in, pos, n, 0,
                                                   key_bits(num_weights), stream));
  detail::after_launch("embedding_backward_sort", stream);
  EMBER_DISPATCH_FLOATING(dtype, "embedding_backward", [&] {
    launch_elements("embedding_backward",
                    n * dim,
                    kernels::EmbeddingBackwardSegmentF<scalar_t>{keys, pos, n, dim, padding_idx,
                                                                 static_cast<const scalar_t*>(g),
                                                                 static_cast<scalar_t*>(gw)},
                    device_index);
  });
}

void layer_norm_forward(DType dtype, const void* x, const void* w, const void* b, void* y, double* mean, double* rstd,
                        int64_t M, int64_t N, double eps, int device_index) {
  CudaDeviceGuard guard(device_index);
  EMBER_DISPATCH_FLOATING(dtype, "layer_norm", [&] {
    launch_elements("layer_norm_forward", M,
                    kernels::LayerNormForwardRowF<scalar_t>{static_cast<const scalar_t*>(x),
                                                            static_cast<const scalar_t*>(w),
                                                            static_cast<const scalar_t*>(b), static_cast<scalar_t*>(y),
                                                            mean, rstd, N, eps},
                    device_index);
  });
}

void layer_norm_backward(DType dtype, const void* g, const void* x, const void* w, const double* mean,
                         const double* rstd, int64_t M, int64_t N, void* gx, void* gw, void* gb, int device_index) {
  CudaDeviceGuard guard(device_index);
  EMBER_DISPATCH_FLOATING(dtype, "layer_norm_backward", [&] {
    const auto* gp = static_cast<const scalar_t*>(g);
    const auto* xp = static_cast<const scalar_t*>(x);
    if (gx != nullptr) {
      launch_elements("layer_norm_backward_input", M,
                      kernels::LayerNormBackwardRowF<scalar_t>{gp, xp, static_cast<const scalar_t*>(w), mean, rstd, N,
                                                               static_cast<scalar_t*>(gx)},
                      device_index);
    }
    if (gw != nullptr || gb != nullptr) {
      launch_elements("layer_norm_backward_weight", N,
                      kernels::LayerNormWeightColumnF<scalar_t>{gp, xp, mean, rstd, M, N, static_cast<scalar_t*>(gw),
                                                                static_cast<scalar_t*>(gb)},
                      device_index);
    }
  });
}

}  // namespace ember::cuda
