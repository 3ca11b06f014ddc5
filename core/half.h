// 16-bit floating types stored as raw bits, converted through float for arithmetic.
// Host/device: usable from kernels compiled by nvcc. Value types, trivially copyable.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/macros.h"

namespace ember {

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  EMBER_HOST_DEVICE BFloat16(float f) {  // round to nearest even
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) {
      bits = 0x7fc0;
      return;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    bits = static_cast<uint16_t>(u >> 16);
  }
  EMBER_HOST_DEVICE operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
};

struct Half {
  uint16_t bits = 0;
  Half() = default;
  EMBER_HOST_DEVICE Half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
    uint32_t mant = x & 0x7fffffu;
    if (((x >> 23) & 0xff) == 0xff) {
      bits = static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
    } else if (exp >= 31) {
      bits = static_cast<uint16_t>(sign | 0x7c00u);
    } else if (exp <= 0) {
      if (exp < -10) {
        bits = static_cast<uint16_t>(sign);
      } else {
        mant |= 0x800000u;
        uint32_t shift = static_cast<uint32_t>(14 - exp);
        uint32_t half_mant = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
        bits = static_cast<uint16_t>(sign | half_mant);
      }
    } else {
      uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
      uint32_t rem = mant & 0x1fffu;
      if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
      bits = static_cast<uint16_t>(h);
    }
  }
  EMBER_HOST_DEVICE operator float() const {
    uint32_t sign = (static_cast<uint32_t>(bits) & 0x8000u) << 16;
    uint32_t exp = (bits >> 10) & 0x1f;
    uint32_t mant = bits & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
      if (mant == 0) {
        u = sign;
      } else {
        int e = -1;
        do { mant <<= 1; ++e; } while (!(mant & 0x400u));
        u = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
      }
    } else if (exp == 31) {
      u = sign | 0x7f800000u | (mant << 13);
    } else {
      u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
};

}  // namespace ember
