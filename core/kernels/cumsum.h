// cumsum's per-element math, once, as a per-line functor (the worked example of
// docs/ARCHITECTURE.md): line l of a contiguous tensor viewed as [outer, n, inner] (LineGeometry,
// core/kernels/loops.h) gets the running sum of its elements, from the front or (reverse, the
// backward) from the back. The CPU kernel runs it over lines with the thread pool, the CUDA kernel
// one thread per line; both sum in Acc (double for floating types), so the two devices agree.
// Host/device.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/kernels/loops.h"
#include "core/macros.h"

namespace ember::kernels {

template <typename T, typename Acc>
struct CumsumLineF {
  LineGeometry g;
  bool reverse;
  const T* in;
  T* out;
  EMBER_HOST_DEVICE void operator()(int64_t line) const {
    const int64_t b = g.base(line), s = g.inner, n = g.n;
    Acc acc = 0;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t k = b + (reverse ? n - 1 - j : j) * s;
      acc += static_cast<Acc>(in[k]);
      out[k] = static_cast<T>(acc);
    }
  }
};

/// Calls run(functor, lines) with the functor for `dtype` (float32, float64, int64; others throw
/// TypeError): the CPU and the CUDA kernel both dispatch through it.
template <typename Run>
void visit_cumsum(DType dtype, const LineGeometry& g, bool reverse, const void* in, void* out, int64_t lines,
                  const Run& run) {
  switch (dtype) {
    case DType::Float32:
      return run(CumsumLineF<float, double>{g, reverse, static_cast<const float*>(in), static_cast<float*>(out)}, lines);
    case DType::Float64:
      return run(CumsumLineF<double, double>{g, reverse, static_cast<const double*>(in), static_cast<double*>(out)},
                 lines);
    case DType::Int64:
      return run(CumsumLineF<int64_t, int64_t>{g, reverse, static_cast<const int64_t*>(in), static_cast<int64_t*>(out)},
                 lines);
    default:
      break;
  }
  EMBER_THROW(TypeError, "cumsum: expected float32, float64 or int64, got ", dtype);
}

}  // namespace ember::kernels
