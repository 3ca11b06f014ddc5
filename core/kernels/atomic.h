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

/// The 32-bit word `word` with its 16-bit half at bit `shift` (0 or 16), read as a T
/// (Half/BFloat16), replaced by that value plus v rounded to T; the other half unchanged. The
/// step of atomic_add's compare-and-swap loop for 16-bit floats, which CUDA can only swap as the
/// aligned word around them (Note [16-bit atomic add]).
template <typename T>
EMBER_HOST_DEVICE inline uint32_t add_to_half_word(uint32_t word, unsigned shift, T v) {
  T cur;
  cur.bits = static_cast<uint16_t>(word >> shift);
  const T sum(static_cast<float>(cur) + static_cast<float>(v));
  return (word & ~(0xffffu << shift)) | (static_cast<uint32_t>(sum.bits) << shift);
}

// Note [16-bit atomic add]
// A Half/BFloat16 atomic add on CUDA is a compare-and-swap loop on the 4-byte-aligned word that
// holds the element (the allocator's blocks are aligned far beyond 4 bytes, so that word lies in
// the same allocation). Only the element's half is rewritten; a concurrent change of the other
// half fails the swap and the loop retries, so neither update is lost. Every add rounds to the
// 16-bit type, in an unspecified order, as PyTorch's CUDA index_add_/scatter_add_ do for these
// types. Portable to every architecture (native 16-bit atomicAdd needs sm_70/sm_80 and
// cuda_fp16.h, which device-neutral headers must not include).

/// *p += v. T: float, double, int32_t, int64_t, bool (logical or), Half/BFloat16.
template <typename T>
EMBER_HOST_DEVICE inline void atomic_add(T* p, T v) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));  // two's complement
  } else if constexpr (std::is_same_v<T, bool>) {
    if (v) *reinterpret_cast<volatile bool*>(p) = true;  // every writer stores the same value
  } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int32_t>) {
    atomicAdd(p, v);
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    // See Note [16-bit atomic add].
    const auto addr = reinterpret_cast<uintptr_t>(p);
    auto* word = reinterpret_cast<unsigned int*>(addr & ~uintptr_t{3});
    const unsigned shift = (addr & 2u) ? 16u : 0u;
    unsigned int seen = *reinterpret_cast<volatile unsigned int*>(word);
    unsigned int assumed;
    do {
      assumed = seen;
      seen = atomicCAS(word, assumed, add_to_half_word<T>(assumed, shift, v));
    } while (seen != assumed);
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
