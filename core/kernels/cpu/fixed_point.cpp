#include "core/kernels/cpu/fixed_point.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/kernels/fixed_point.h"
#include "core/thread_pool.h"

namespace ember::kernels::cpu {
namespace {

// Elements per piece of the thread pool's split (a size, never a count: see the header).
constexpr int64_t kGrain = 32768;

template <typename T>
double max_abs_typed(const T* x, int64_t n) {
  const int64_t pieces = (n + kGrain - 1) / kGrain;
  std::vector<double> part(static_cast<size_t>(std::max<int64_t>(pieces, 1)), 0.0);
  const FixedPointAbsF<T> f;
  parallel_for(0, pieces, 1, [&](int64_t pb, int64_t pe) {
    for (int64_t p = pb; p < pe; ++p) {
      double m = 0.0;
      const int64_t e = std::min(n, (p + 1) * kGrain);
      for (int64_t i = p * kGrain; i < e; ++i) m = std::max(m, f(x[i]));
      part[static_cast<size_t>(p)] = m;
    }
  });
  double m = 0.0;
  for (double v : part) m = std::max(m, v);
  return m;
}

}  // namespace

double fixed_point_max_abs(DType dtype, const void* x, int64_t n) {
  if (dtype == kFloat32) return max_abs_typed(static_cast<const float*>(x), n);
  EMBER_CHECK_T(TypeError, dtype == kFloat64, "fixed_point_max_abs: expected float32 or float64, got ", dtype);
  return max_abs_typed(static_cast<const double*>(x), n);
}

void fixed_point_accumulate(DType dtype, const void* x, int64_t* acc, int64_t n, int exponent) {
  auto run = [&](auto* typed) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(typed)>>;
    const FixedPointAccumulateF<T> f{typed, acc, make_pow2_scale(exponent)};
    parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) f(i);
    });
  };
  if (dtype == kFloat32) return run(static_cast<const float*>(x));
  EMBER_CHECK_T(TypeError, dtype == kFloat64, "fixed_point_accumulate: expected float32 or float64, got ", dtype);
  run(static_cast<const double*>(x));
}

void fixed_point_to_float(DType dtype, const int64_t* acc, void* out, int64_t n, int exponent, double divisor) {
  auto run = [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    const FixedPointToFloatF<T> f{acc, typed, make_pow2_scale(-exponent), divisor};
    parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) f(i);
    });
  };
  if (dtype == kFloat32) return run(static_cast<float*>(out));
  EMBER_CHECK_T(TypeError, dtype == kFloat64, "fixed_point_to_float: expected float32 or float64, got ", dtype);
  run(static_cast<double*>(out));
}

}  // namespace ember::kernels::cpu
