// Portability macros shared by host and device code.
#pragma once
#if defined(__CUDACC__)
#define EMBER_HOST_DEVICE __host__ __device__
#else
#define EMBER_HOST_DEVICE
#endif

// Forces inlining where a caller relies on constant folding through the callee (see
// FixedFloatUnaryF in core/kernels/elementwise.h).
#if defined(__CUDACC__)
#define EMBER_FORCE_INLINE __forceinline__
#elif defined(__GNUC__)
#define EMBER_FORCE_INLINE inline __attribute__((always_inline))
#else
#define EMBER_FORCE_INLINE inline
#endif
