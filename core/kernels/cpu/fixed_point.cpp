#include "core/kernels/cpu/fixed_point.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/kernels/fixed_point.h"
#include "core/thread_pool.h"

namespace ember::kernels::cpu {
namespace {

// Elements per piece of the thread pool's split (a size, never a count: see the header).
constexpr int64_t kGrain = 32768;

// FixedPointAbsF's max over x[b, e), written so that it vectorizes: the max of |x| in T (exact:
// the conversion to double changes no value), and whether a NaN was seen, kept apart (+Inf is
// the max by itself).
template <typename T>
double max_abs_piece(const T* x, int64_t b, int64_t e) {
  T m = 0;
  int nan = 0;
  for (int64_t i = b; i < e; ++i) {
    const T v = x[i];
    nan |= v != v;
    const T a = std::fabs(v);
    m = a > m ? a : m;
  }
  return nan ? INFINITY : static_cast<double>(m);
}

template <typename T>
double max_abs_typed(const T* x, int64_t n) {
  const int64_t pieces = (n + kGrain - 1) / kGrain;
  std::vector<double> part(static_cast<size_t>(std::max<int64_t>(pieces, 1)), 0.0);
  parallel_for(0, pieces, 1, [&](int64_t pb, int64_t pe) {
    for (int64_t p = pb; p < pe; ++p) part[static_cast<size_t>(p)] = max_abs_piece(x, p * kGrain, std::min(n, (p + 1) * kGrain));
  });
  double m = 0.0;
  for (double v : part) m = std::max(m, v);
  return m;
}

}  // namespace

double fixed_point_max_abs(DType dtype, const void* x, int64_t n, int /*device_index*/) {
  if (dtype == kFloat32) return max_abs_typed(static_cast<const float*>(x), n);
  EMBER_CHECK_T(TypeError, dtype == kFloat64, "fixed_point_max_abs: expected float32 or float64, got ", dtype);
  return max_abs_typed(static_cast<const double*>(x), n);
}

void fixed_point_accumulate(DType dtype, const void* x, int64_t* acc, int64_t n, int exponent, int /*device_index*/) {
  auto run = [&](auto* typed) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(typed)>>;
    const FixedPointAccumulateF<T> f{typed, acc, make_pow2_scale(exponent)};
    const bool plain = exponent <= kFixedPointMaxExponent && exponent >= -kFixedPointMaxExponent;
    parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
      if (plain) {  // f(i) with its power of two as one multiplication, hoisted: it vectorizes
        const double factor = f.to_fixed.factor;
        for (int64_t i = b; i < e; ++i) {
          const auto q = static_cast<int64_t>(round_half_even(static_cast<double>(typed[i]) * factor));
          acc[i] = static_cast<int64_t>(static_cast<uint64_t>(acc[i]) + static_cast<uint64_t>(q));
        }
        return;
      }
      for (int64_t i = b; i < e; ++i) f(i);
    });
  };
  if (dtype == kFloat32) return run(static_cast<const float*>(x));
  EMBER_CHECK_T(TypeError, dtype == kFloat64, "fixed_point_accumulate: expected float32 or float64, got ", dtype);
  run(static_cast<const double*>(x));
}

void fixed_point_to_float(DType dtype, const int64_t* acc, void* out, int64_t n, int exponent, double divisor,
                          int /*device_index*/) {
  auto run = [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    const FixedPointToFloatF<T> f{acc, typed, make_pow2_scale(-exponent), divisor};
    const bool plain = exponent <= kFixedPointMaxExponent && exponent >= -kFixedPointMaxExponent;
    parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
      if (plain) {  // f(i), its power of two hoisted
        const double factor = f.from_fixed.factor;
        for (int64_t i = b; i < e; ++i) typed[i] = static_cast<T>((static_cast<double>(acc[i]) * factor) / divisor);
        return;
      }
      for (int64_t i = b; i < e; ++i) f(i);
    });
  };
  if (dtype == kFloat32) return run(static_cast<float*>(out));
  EMBER_CHECK_T(TypeError, dtype == kFloat64, "fixed_point_to_float: expected float32 or float64, got ", dtype);
  run(static_cast<double*>(out));
}

}  // namespace ember::kernels::cpu
