#include "core/kernels/cpu/norm.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/kernels/cpu/isa.h"
#include "core/kernels/cpu/vec_math.h"
#include "core/kernels/norm.h"
#include "core/thread_pool.h"

namespace ember::kernels::cpu {
namespace {

constexpr int64_t kBlock = 512;  // float lanes accumulate this many elements before a double sum

// Sum of squares of n floats: float vector lanes per block of kBlock, blocks summed in double.
template <int W>
EMBER_CPU_INLINE double sum_squares(const float* x, int64_t n) {
  using V = vfloat<W>;
  double total = 0.0;
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    V a = splat<V>(0.0f), b = a;
    for (int64_t k = 0; k < kBlock; k += 2 * W) {
      const V u = load<V>(x + i + k), v = load<V>(x + i + k + W);
      a += u * u;
      b += v * v;
    }
    total += static_cast<double>(hsum<W>(a + b));
  }
  for (; i < n; ++i) total += static_cast<double>(x[i]) * x[i];
  return total;
}

// Any p, float32 or float64: the terms and combine of core/kernels/norm.h in element order.
template <typename T>
double generic_partial(const T* x, int64_t n, double p) {
  const NormReduce kind = norm_reduce_kind(p);
  const NormCombineF combine{kind};
  double acc = norm_identity(kind);
  for (int64_t i = 0; i < n; ++i) acc = combine(acc, norm_term(static_cast<double>(x[i]), p, kind));
  return acc;
}

template <int W>
EMBER_CPU_INLINE void scale_rows(float* x, int64_t n, float scale) {
  using V = vfloat<W>;
  const V sv = splat<V>(scale);
  int64_t i = 0;
  for (; i + W <= n; i += W) store(x + i, load<V>(x + i) * sv);
  for (; i < n; ++i) x[i] *= scale;
}

}  // namespace

EMBER_CPU_ISA_VARIANTS(void, scale_f32, (float* x, int64_t n, float scale), (x, n, scale), scale_rows<kW>(x, n, scale))
EMBER_CPU_ISA_VARIANTS(double, sum_squares_f32, (const float* x, int64_t n), (x, n), return sum_squares<kW>(x, n))

void norm_partials(DType dtype, const void* x, int64_t n, double p, double* out) {
  const int64_t chunks = (n + kNormChunk - 1) / kNormChunk;
  parallel_for(0, chunks, n >= 4 * kNormChunk ? 1 : chunks, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t b = c * kNormChunk, len = std::min(kNormChunk, n - b);
      if (dtype == kFloat32 && p == 2.0) {
        out[c] = sum_squares_f32(static_cast<const float*>(x) + b, len);
      } else if (dtype == kFloat32) {
        out[c] = generic_partial(static_cast<const float*>(x) + b, len, p);
      } else {
        EMBER_INTERNAL_ASSERT(dtype == kFloat64, "norm_partials: dtype ", dtype);
        out[c] = generic_partial(static_cast<const double*>(x) + b, len, p);
      }
    }
  });
}

void scale_inplace(DType dtype, void* x, int64_t n, double scale) {
  parallel_for(0, n, 4 * kNormChunk, [&](int64_t b, int64_t e) {
    if (dtype == kFloat32) {
      scale_f32(static_cast<float*>(x) + b, e - b, static_cast<float>(scale));
    } else {
      EMBER_INTERNAL_ASSERT(dtype == kFloat64, "scale_inplace: dtype ", dtype);
      double* p = static_cast<double*>(x);
      for (int64_t i = b; i < e; ++i) p[i] *= scale;
    }
  });
}

}  // namespace ember::kernels::cpu
