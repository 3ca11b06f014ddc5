#include "parallel/distributed/detail/reduce_kernels.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/error.h"

namespace ember::parallel::detail {

namespace {

template <typename T>
inline bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

// Works on T for 32/64-bit types; 16-bit floats are widened to float per element.
template <typename T, typename F>
void combine(void* dst_v, const void* a_v, const void* b_v, int64_t n, F f) {
  T* dst = static_cast<T*>(dst_v);
  const T* a = static_cast<const T*>(a_v);
  const T* b = static_cast<const T*>(b_v);
  if constexpr (sizeof(T) == 2) {
    for (int64_t i = 0; i < n; ++i) dst[i] = T(f(static_cast<float>(a[i]), static_cast<float>(b[i])));
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = f(a[i], b[i]);
  }
}

template <typename T>
void reduce_typed(ReduceOp op, void* dst, const void* a, const void* b, int64_t n) {
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:
      return combine<T>(dst, a, b, n, [](auto x, auto y) { return x + y; });
    case ReduceOp::PRODUCT:
      return combine<T>(dst, a, b, n, [](auto x, auto y) { return x * y; });
    case ReduceOp::MAX:  // a NaN wins, as in PyTorch
      return combine<T>(dst, a, b, n, [](auto x, auto y) { return (is_nan(x) || x > y) ? x : y; });
    case ReduceOp::MIN:
      return combine<T>(dst, a, b, n, [](auto x, auto y) { return (is_nan(x) || x < y) ? x : y; });
  }
}

bool is_power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

template <typename T>
void divide_typed(void* dst_v, int64_t n, int64_t divisor) {
  T* dst = static_cast<T*>(dst_v);
  if constexpr (sizeof(T) == 2) {
    const float d = static_cast<float>(divisor);
    for (int64_t i = 0; i < n; ++i) dst[i] = T(static_cast<float>(dst[i]) / d);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (is_power_of_two(divisor)) {  // x * (1/2^k) is exactly x / 2^k, and far cheaper
      const T inv = T(1) / static_cast<T>(divisor);
      for (int64_t i = 0; i < n; ++i) dst[i] = dst[i] * inv;
    } else {
      const T d = static_cast<T>(divisor);
      for (int64_t i = 0; i < n; ++i) dst[i] = dst[i] / d;
    }
  } else {
    const T d = static_cast<T>(divisor);
    for (int64_t i = 0; i < n; ++i) dst[i] = dst[i] / d;
  }
}

// dst = (dst + b) [/ divisor], copied to `copy`: float32/float64 SUM and AVG in one pass.
template <typename T>
void sum_last_typed(T* __restrict dst, const T* __restrict b, T* __restrict copy, int64_t n, int64_t divisor) {
  if (divisor <= 1) {
    for (int64_t i = 0; i < n; ++i) copy[i] = dst[i] = dst[i] + b[i];
  } else if (is_power_of_two(divisor)) {
    const T inv = T(1) / static_cast<T>(divisor);
    for (int64_t i = 0; i < n; ++i) copy[i] = dst[i] = (dst[i] + b[i]) * inv;
  } else {
    const T d = static_cast<T>(divisor);
    for (int64_t i = 0; i < n; ++i) copy[i] = dst[i] = (dst[i] + b[i]) / d;
  }
}

}  // namespace

bool is_reducible_dtype(DType dtype) {
  switch (dtype) {
    case DType::Float32:
    case DType::Float64:
    case DType::Int64:
    case DType::Int32:
    case DType::BFloat16:
    case DType::Float16:
      return true;
    default:
      return false;
  }
}

void reduce_into(DType dtype, ReduceOp op, void* dst, const void* a, const void* b, int64_t n) {
  if (n <= 0) return;
  switch (dtype) {
    case DType::Float32: return reduce_typed<float>(op, dst, a, b, n);
    case DType::Float64: return reduce_typed<double>(op, dst, a, b, n);
    case DType::Int64: return reduce_typed<int64_t>(op, dst, a, b, n);
    case DType::Int32: return reduce_typed<int32_t>(op, dst, a, b, n);
    case DType::BFloat16: return reduce_typed<BFloat16>(op, dst, a, b, n);
    case DType::Float16: return reduce_typed<Half>(op, dst, a, b, n);
    default: break;
  }
  EMBER_THROW(TypeError, "reduce: unsupported dtype ", dtype);
}

void divide_by(DType dtype, void* dst, int64_t n, int64_t divisor) {
  if (n <= 0 || divisor == 1) return;
  switch (dtype) {
    case DType::Float32: return divide_typed<float>(dst, n, divisor);
    case DType::Float64: return divide_typed<double>(dst, n, divisor);
    case DType::Int64: return divide_typed<int64_t>(dst, n, divisor);
    case DType::Int32: return divide_typed<int32_t>(dst, n, divisor);
    case DType::BFloat16: return divide_typed<BFloat16>(dst, n, divisor);
    case DType::Float16: return divide_typed<Half>(dst, n, divisor);
    default: break;
  }
  EMBER_THROW(TypeError, "reduce: unsupported dtype ", dtype);
}

void reduce_last_into(DType dtype, ReduceOp op, void* dst, const void* b, void* copy, int64_t n, int64_t divisor) {
  if (n <= 0) return;
  const int64_t d = op == ReduceOp::AVG ? divisor : 1;
  const bool sum = op == ReduceOp::SUM || op == ReduceOp::AVG;
  if (sum && copy != nullptr && dtype == DType::Float32) {
    return sum_last_typed(static_cast<float*>(dst), static_cast<const float*>(b), static_cast<float*>(copy), n, d);
  }
  if (sum && copy != nullptr && dtype == DType::Float64) {
    return sum_last_typed(static_cast<double*>(dst), static_cast<const double*>(b), static_cast<double*>(copy), n, d);
  }
  reduce_into(dtype, op, dst, dst, b, n);
  if (op == ReduceOp::AVG) divide_by(dtype, dst, n, divisor);
  if (copy != nullptr) std::memcpy(copy, dst, static_cast<size_t>(n) * element_size(dtype));
}

}  // namespace ember::parallel::detail
