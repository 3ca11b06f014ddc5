#include "core/kernels/cpu/embedding.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"

namespace ember::kernels::cpu {
namespace {

// Rows of row_bytes bytes.
void embedding_forward_kernel(const int64_t* idx, int64_t n, const char* w, char* out, int64_t dim, size_t row_bytes) {
  parallel_for(0, n, std::max<int64_t>(1, 16384 / std::max<int64_t>(dim, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      std::memcpy(out + static_cast<size_t>(i) * row_bytes, w + static_cast<size_t>(idx[i]) * row_bytes, row_bytes);
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

void embedding_forward(DType dtype, const int64_t* idx, int64_t n, int64_t dim, const void* w, void* out,
                       int /*device_index*/) {
  embedding_forward_kernel(idx, n, static_cast<const char*>(w), static_cast<char*>(out), dim,
                           static_cast<size_t>(dim) * element_size(dtype));
}

size_t embedding_backward_scratch_bytes(int64_t /*n*/, int64_t /*num_weights*/, int /*device_index*/) { return 0; }

void embedding_backward(DType dtype, const int64_t* idx, int64_t n, int64_t /*num_weights*/, int64_t dim,
                        int64_t padding_idx, const void* g, void* gw, void* /*scratch*/, size_t /*scratch_bytes*/,
                        int /*device_index*/) {
  const int64_t pad = padding_idx;
  if (dtype == kFloat32) {
    return embedding_backward_kernel(idx, n, static_cast<const float*>(g), static_cast<float*>(gw), dim, pad);
  }
  EMBER_INTERNAL_ASSERT(dtype == kFloat64, "embedding_backward: dtype ", dtype);
  embedding_backward_kernel(idx, n, static_cast<const double*>(g), static_cast<double*>(gw), dim, pad);
}

}  // namespace ember::kernels::cpu
