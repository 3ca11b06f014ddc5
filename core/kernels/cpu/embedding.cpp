#include "core/kernels/cpu/embedding.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"

namespace ember::kernels::cpu {
namespace {

template <typename T>
void embedding_forward_kernel(const int64_t* idx, int64_t n, const T* w, T* out, int64_t dim) {
  parallel_for(0, n, std::max<int64_t>(1, 16384 / std::max<int64_t>(dim, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      std::memcpy(out + i * dim, w + idx[i] * dim, sizeof(T) * static_cast<size_t>(dim));
    }
  });
}

// Serial over indices in order, so the sum for a repeated index is the same on every run.
template <typename T>
void embedding_backward_kernel(const int64_t* idx, int64_t n, const T* g, T* gw, int64_t dim, int64_t pad) {
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = idx[i];
    if (r == pad) continue;
    T* dst = gw + r * dim;
    const T* src = g + i * dim;
    for (int64_t j = 0; j < dim; ++j) dst[j] += src[j];
  }
}

}  // namespace

void embedding_forward(DType dtype, const void* w, const int64_t* idx, int64_t n, int64_t dim, void* out) {
  if (dtype == kFloat32) {
    return embedding_forward_kernel(idx, n, static_cast<const float*>(w), static_cast<float*>(out), dim);
  }
  EMBER_INTERNAL_ASSERT(dtype == kFloat64, "embedding_forward: dtype ", dtype);
  embedding_forward_kernel(idx, n, static_cast<const double*>(w), static_cast<double*>(out), dim);
}

void embedding_backward(DType dtype, const void* g, const int64_t* idx, int64_t n, int64_t dim, int64_t pad,
                        void* gw) {
  if (dtype == kFloat32) {
    return embedding_backward_kernel(idx, n, static_cast<const float*>(g), static_cast<float*>(gw), dim, pad);
  }
  EMBER_INTERNAL_ASSERT(dtype == kFloat64, "embedding_backward: dtype ", dtype);
  embedding_backward_kernel(idx, n, static_cast<const double*>(g), static_cast<double*>(gw), dim, pad);
}

}  // namespace ember::kernels::cpu
