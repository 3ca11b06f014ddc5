// The one cross-thread primitive a launch-grid functor may use (Note [Kernels as launch-grid
// functors], core/kernels/launch.h): an atomic read-modify-write on device memory. Under nvcc's
// device pass these are CUDA atomics; on the host (the sequential CPU emulation of a launch)
// a plain read-modify-write, which is exact there because emulated threads never overlap.
#pragma once
#include <cstdint>
#include <type_traits>

#include "core/half.h"
#include "core/macros.h"

namespace ember::kernels {

/// *p += v. T: float, double, int32_t, int64_t, bool (logical or), Half/BFloat16 (host only).
template <typename T>
EMBER_HOST_DEVICE inline void atomic_add(T* p, T v) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));  // two's complement
  } else if constexpr (std::is_same_v<T, bool>) {
    if (v) *reinterpret_cast<volatile bool*>(p) = true;  // every writer stores the same value
  } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int32_t>) {
    atomicAdd(p, v);
  } else {
    static_assert(sizeof(T) == 0, "atomic_add: unsupported type on CUDA");
  }
#else
  if constexpr (std::is_same_v<T, bool>) {
    *p = *p || v;
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    *p = T(static_cast<float>(*p) + static_cast<float>(v));
  } else {
    *p += v;
  }
#endif
}

/// *p = min(*p, v) for unsigned 64-bit values.
EMBER_HOST_DEVICE inline void atomic_min_u64(unsigned long long* p, unsigned long long v) {
#if defined(__CUDA_ARCH__)
  atomicMin(p, v);
#else
  if (v < *p) *p = v;
#endif
}

}  // namespace ember::kernels
