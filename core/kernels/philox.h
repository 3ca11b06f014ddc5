// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11; the
// Random123 constants) and the fixed mapping from Philox blocks to distribution samples.
// Header-only, host+device: the CPU ops (core/ops/random.cpp) and CUDA kernels include the
// same functions, so a seed gives the same stream on both. Pure functions; thread-safe.
#pragma once
#include <cstdint>
#include <math.h>  // ::logf, ::sqrtf, ... (usable in device code, unlike some std:: overloads)

#include "core/macros.h"

namespace ember::kernels {

// Note [Philox stream layout]
// A generator state is (seed, offset). The seed is the 64-bit Philox key (low word first);
// block b of a kernel launch is the Philox output for the 128-bit counter offset + b (low
// word first). Every op reserves ceil(n / kPerBlock) blocks and element i (in row-major
// order of the output) takes lane i % kPerBlock of block i / kPerBlock, where kPerBlock is:
//   uniform / normal of float32, bfloat16, float16 : 4  (one uint32 per sample;
//       normals pair lanes (0,1) and (2,3) through Box-Muller)
//   uniform / normal of float64                     : 2  (one uint64 = lanes (2k, 2k+1) per
//       sample; normals pair the two uniforms of a block)
//   randint, randperm, bernoulli with a scalar p    : 2  (one uint64 per sample)
// Results therefore depend only on (seed, offset, i): never on thread count or device.

constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;  // sqrt(3) - 1

struct PhiloxBlock {
  uint32_t v[4];
};

EMBER_HOST_DEVICE inline void philox_mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  uint64_t p = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

/// The raw Philox4x32-10 bijection: 10 rounds over `ctr` with the 64-bit key (k0, k1).
EMBER_HOST_DEVICE inline PhiloxBlock philox4x32_10(PhiloxBlock ctr, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kPhiloxM0, ctr.v[0], &hi0, &lo0);
    philox_mulhilo(kPhiloxM1, ctr.v[2], &hi1, &lo1);
    PhiloxBlock next;
    next.v[0] = hi1 ^ ctr.v[1] ^ k0;
    next.v[1] = lo1;
    next.v[2] = hi0 ^ ctr.v[3] ^ k1;
    next.v[3] = lo0;
    ctr = next;
  }
  return ctr;
}

/// Block `block` of the stream (seed, offset). See Note [Philox stream layout].
EMBER_HOST_DEVICE inline PhiloxBlock philox_block(uint64_t seed, uint64_t offset, uint64_t block) {
  uint64_t c = offset + block;
  uint32_t carry = c < offset ? 1u : 0u;  // the counter is 128-bit: carry into word 2
  PhiloxBlock ctr;
  ctr.v[0] = static_cast<uint32_t>(c);
  ctr.v[1] = static_cast<uint32_t>(c >> 32);
  ctr.v[2] = carry;
  ctr.v[3] = 0;
  return philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

EMBER_HOST_DEVICE inline uint64_t philox_u64(const PhiloxBlock& b, int pair) {
  return static_cast<uint64_t>(b.v[2 * pair]) | (static_cast<uint64_t>(b.v[2 * pair + 1]) << 32);
}

// ---- uint -> uniform ---------------------------------------------------------------

/// [0, 1) with 24 random bits (every value exactly representable in float).
EMBER_HOST_DEVICE inline float uint32_to_unit_float(uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}
/// [0, 1) with `bits` random bits (bits <= 24): 8 for bfloat16, 11 for float16, so the
/// result never rounds up to 1 when stored in the narrow type.
EMBER_HOST_DEVICE inline float uint32_to_unit_float_bits(uint32_t x, int bits) {
  return static_cast<float>(x >> (32 - bits)) * (1.0f / static_cast<float>(1u << bits));
}
/// [0, 1) with 53 random bits.
EMBER_HOST_DEVICE inline double uint64_to_unit_double(uint64_t x) {
  return static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0);
}

/// floor(x * range / 2^64): maps a uniform uint64 onto [0, range). The bias is below
/// range / 2^64 per value, negligible for any range a tensor can index.
EMBER_HOST_DEVICE inline uint64_t mulhi_u64(uint64_t x, uint64_t range) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(x, range);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(x) * range) >> 64);
#endif
}

// ---- Box-Muller ----------------------------------------------------------------------

EMBER_HOST_DEVICE inline float philox_log(float x) { return ::logf(x); }
EMBER_HOST_DEVICE inline double philox_log(double x) { return ::log(x); }
EMBER_HOST_DEVICE inline float philox_sqrt(float x) { return ::sqrtf(x); }
EMBER_HOST_DEVICE inline double philox_sqrt(double x) { return ::sqrt(x); }
EMBER_HOST_DEVICE inline float philox_sin(float x) { return ::sinf(x); }
EMBER_HOST_DEVICE inline double philox_sin(double x) { return ::sin(x); }
EMBER_HOST_DEVICE inline float philox_cos(float x) { return ::cosf(x); }
EMBER_HOST_DEVICE inline double philox_cos(double x) { return ::cos(x); }

/// Two independent N(0, 1) samples from uniforms u1, u2 in [0, 1). Uses 1 - u1 in (0, 1]
/// so the logarithm is finite. T is float or double.
template <typename T>
EMBER_HOST_DEVICE inline void box_muller(T u1, T u2, T* z0, T* z1) {
  const T two_pi = static_cast<T>(6.283185307179586476925286766559);
  T r = philox_sqrt(static_cast<T>(-2) * philox_log(static_cast<T>(1) - u1));
  T theta = two_pi * u2;
  *z0 = r * philox_cos(theta);
  *z1 = r * philox_sin(theta);
}

// ---- block -> samples (Note [Philox stream layout]) ------------------------------------

/// Four float uniforms in [0, 1) with `bits` random bits each (24 for float32).
EMBER_HOST_DEVICE inline void uniform4_float(const PhiloxBlock& b, int bits, float out[4]) {
  for (int k = 0; k < 4; ++k) out[k] = uint32_to_unit_float_bits(b.v[k], bits);
}
/// Two double uniforms in [0, 1).
EMBER_HOST_DEVICE inline void uniform2_double(const PhiloxBlock& b, double out[2]) {
  out[0] = uint64_to_unit_double(philox_u64(b, 0));
  out[1] = uint64_to_unit_double(philox_u64(b, 1));
}
/// Four float N(0, 1) samples.
EMBER_HOST_DEVICE inline void normal4_float(const PhiloxBlock& b, float out[4]) {
  float u[4];
  uniform4_float(b, 24, u);
  box_muller(u[0], u[1], &out[0], &out[1]);
  box_muller(u[2], u[3], &out[2], &out[3]);
}
/// Two double N(0, 1) samples.
EMBER_HOST_DEVICE inline void normal2_double(const PhiloxBlock& b, double out[2]) {
  double u[2];
  uniform2_double(b, u);
  box_muller(u[0], u[1], &out[0], &out[1]);
}

}  // namespace ember::kernels
