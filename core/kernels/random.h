// The random ops, once: one functor call per Philox block b writes the elements b * kPerBlock
// ... of a contiguous output (Note [Philox stream layout], core/kernels/philox.h). Both devices
// run these functors through visit_random -- the CPU kernel (core/kernels/cpu/random.cpp) over
// the thread pool, the CUDA kernel (core/kernels/cuda/random.cu) through ElementKernel (Note
// [Kernels as launch-grid functors]) -- so a (seed, offset) gives the same numbers on both.
// Floating outputs: float32 and float64 on both devices, bfloat16 and float16 on CPU; any dtype
// for the 0/1 and integer ops. Host/device.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "core/kernels/philox.h"
#include "core/macros.h"

namespace ember::kernels {

// Double arithmetic without contraction into a fused multiply-add, which nvcc does by default
// and the CPU build does not: an FMA would round once where the CPU rounds twice.
EMBER_HOST_DEVICE inline double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
EMBER_HOST_DEVICE inline double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

/// Where the op's samples come from and where they go.
struct RandomTarget {
  uint64_t seed = 0;
  uint64_t offset = 0;  // Philox blocks
  int64_t n = 0;        // elements of the contiguous output
};

/// Samples per Philox block of a floating output: 2 for float64, 4 for the others.
template <typename T>
constexpr int philox_per_block() {
  return std::is_same_v<T, double> ? 2 : 4;
}

/// v rounded to T (16-bit types through float).
template <typename T>
EMBER_HOST_DEVICE T to_scalar(double v) {
  if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

/// The uniforms (as double) or the normals of block b of a T-typed stream: two from 53-bit
/// doubles for float64, else four from floats; a uniform has T's mantissa bits (24 float32,
/// 8 bfloat16, 11 float16).
template <typename T, bool kNormal>
EMBER_HOST_DEVICE inline void philox_samples(const PhiloxBlock& blk, double* out) {
  if constexpr (std::is_same_v<T, double>) {
    if constexpr (kNormal) {
      normal2_double(blk, out);
    } else {
      uniform2_double(blk, out);
    }
  } else {
    float f[4];
    if constexpr (kNormal) {
      normal4_float(blk, f);
    } else {
      uniform4_float(blk, std::is_same_v<T, BFloat16> ? 8 : std::is_same_v<T, Half> ? 11 : 24, f);
    }
    for (int k = 0; k < 4; ++k) out[k] = f[k];
  }
}
template <typename T>
EMBER_HOST_DEVICE inline void philox_uniforms(const PhiloxBlock& blk, double* u) {
  philox_samples<T, false>(blk, u);
}
template <typename T>
EMBER_HOST_DEVICE inline void philox_normals(const PhiloxBlock& blk, double* z) {
  philox_samples<T, true>(blk, z);
}

/// out[i] = from + range * u, kept below `to` (top: the largest T below to) when from < to.
template <typename T>
struct UniformBlockF {
  RandomTarget t;
  T* out;
  double from, range, to;
  T top;
  bool guard;
  EMBER_HOST_DEVICE void operator()(int64_t b) const {
    constexpr int kPer = philox_per_block<T>();
    double u[kPer];
    philox_uniforms<T>(philox_block(t.seed, t.offset, static_cast<uint64_t>(b)), u);
    for (int k = 0; k < kPer && b * kPer + k < t.n; ++k) {
      T v = to_scalar<T>(add_rn(from, mul_rn(range, u[k])));
      if (guard && static_cast<double>(v) >= to) v = top;
      out[b * kPer + k] = v;
    }
  }
};

/// out[i] = mean + std * z (Box-Muller). The device's logf/sinf/cosf may differ from the
/// host's in the last bits, so normals agree across devices to rounding, not bit for bit.
template <typename T>
struct NormalBlockF {
  RandomTarget t;
  T* out;
  double mean, std;
  EMBER_HOST_DEVICE void operator()(int64_t b) const {
    constexpr int kPer = philox_per_block<T>();
    double z[kPer];
    philox_normals<T>(philox_block(t.seed, t.offset, static_cast<uint64_t>(b)), z);
    for (int k = 0; k < kPer && b * kPer + k < t.n; ++k) out[b * kPer + k] = to_scalar<T>(add_rn(mean, mul_rn(std, z[k])));
  }
};

/// out[i] = (u < p) with one double uniform per sample (two per block); any output dtype.
template <typename T>
struct BernoulliScalarBlockF {
  RandomTarget t;
  T* out;
  double p;
  EMBER_HOST_DEVICE void operator()(int64_t b) const {
    double u[2];
    uniform2_double(philox_block(t.seed, t.offset, static_cast<uint64_t>(b)), u);
    for (int k = 0; k < 2 && 2 * b + k < t.n; ++k) out[2 * b + k] = u[k] < p ? T(1.0f) : T(0.0f);
  }
};

/// out[i] = (u < p[i]) with 53-bit uniforms for float64 p, else 24-bit ones (p contiguous, same
/// dtype as out).
template <typename T>
struct BernoulliTensorBlockF {
  RandomTarget t;
  const T* p;
  T* out;
  EMBER_HOST_DEVICE void operator()(int64_t b) const {
    constexpr int kPer = philox_per_block<T>();
    double u[kPer];
    philox_uniforms<std::conditional_t<std::is_same_v<T, double>, double, float>>(
        philox_block(t.seed, t.offset, static_cast<uint64_t>(b)), u);
    for (int k = 0; k < kPer && b * kPer + k < t.n; ++k) {
      const int64_t i = b * kPer + k;
      out[i] = u[k] < static_cast<double>(p[i]) ? T(1.0f) : T(0.0f);
    }
  }
};

/// out[i] = low + floor(u64 * range / 2^64), one uint64 per sample (two per block).
template <typename T>
struct RandintBlockF {
  RandomTarget t;
  T* out;
  int64_t low;
  uint64_t range;
  EMBER_HOST_DEVICE void operator()(int64_t b) const {
    const PhiloxBlock blk = philox_block(t.seed, t.offset, static_cast<uint64_t>(b));
    for (int k = 0; k < 2 && 2 * b + k < t.n; ++k) {
      const auto v = static_cast<int64_t>(static_cast<uint64_t>(low) + mulhi_u64(philox_u64(blk, k), range));
      out[2 * b + k] = static_cast<T>(v);
    }
  }
};

enum class RandomOp : int8_t { kUniform, kNormal, kBernoulliScalar, kBernoulliTensor, kRandint };

/// One random fill, as the ops hand it to a device: which functor, its dtype and parameters.
/// kUniform: a = from, b = range, c = to, top/guard as UniformBlockF (top holds a T exactly).
/// kNormal: a = mean, b = std. kBernoulliScalar: a = p. kBernoulliTensor: p (same dtype).
/// kRandint: low, range.
struct RandomLaunch {
  RandomOp op = RandomOp::kUniform;
  DType dtype = DType::Float32;
  RandomTarget t;
  void* out = nullptr;
  const void* p = nullptr;
  double a = 0, b = 0, c = 0, top = 0;
  bool guard = false;
  int64_t low = 0;
  uint64_t range = 0;
};

/// Philox blocks (= functor calls) a launch of `r` covers.
inline int64_t random_launch_blocks(const RandomLaunch& r) {
  const bool two = r.op == RandomOp::kBernoulliScalar || r.op == RandomOp::kRandint || r.dtype == DType::Float64;
  const int64_t per = two ? 2 : 4;
  return (r.t.n + per - 1) / per;
}

/// Calls run(functor, num_blocks) with r's functor: the CPU kernel runs the blocks over the
/// thread pool, the CUDA launcher (core/kernels/cuda/random.cu) launches them, the CPU tests
/// emulate_launch, so all run this mapping. bfloat16 and float16 outputs of the floating fills
/// only with kWith16BitFloats (the CPU's); TypeError for a dtype outside these.
template <bool kWith16BitFloats = false, typename Run>
void visit_random(const RandomLaunch& r, const Run& run) {
  const int64_t blocks = random_launch_blocks(r);
  const RandomTarget t = r.t;
  switch (r.op) {
    case RandomOp::kUniform:
    case RandomOp::kNormal:
    case RandomOp::kBernoulliTensor: {
      auto floating = [&](auto zero) {
        using T = decltype(zero);
        T* out = static_cast<T*>(r.out);
        if (r.op == RandomOp::kUniform) {
          run(UniformBlockF<T>{t, out, r.a, r.b, r.c, to_scalar<T>(r.top), r.guard}, blocks);
        } else if (r.op == RandomOp::kNormal) {
          run(NormalBlockF<T>{t, out, r.a, r.b}, blocks);
        } else {
          run(BernoulliTensorBlockF<T>{t, static_cast<const T*>(r.p), out}, blocks);
        }
      };
      if (r.dtype == DType::Float32) return floating(0.0f);
      if (r.dtype == DType::Float64) return floating(0.0);
      if constexpr (kWith16BitFloats) {
        if (r.dtype == DType::BFloat16) return floating(BFloat16(0.0f));
        if (r.dtype == DType::Float16) return floating(Half(0.0f));
      }
      break;
    }
    case RandomOp::kBernoulliScalar:
      return EMBER_DISPATCH_ALL(r.dtype, "bernoulli", [&] {
        run(BernoulliScalarBlockF<scalar_t>{t, static_cast<scalar_t*>(r.out), r.a}, blocks);
      });
    case RandomOp::kRandint:
      return EMBER_DISPATCH_NUMERIC(r.dtype, "randint", [&] {
        run(RandintBlockF<scalar_t>{t, static_cast<scalar_t*>(r.out), r.low, r.range}, blocks);
      });
  }
  EMBER_THROW(TypeError, kWith16BitFloats ? "random ops: expected a floating-point dtype, got "
                                          : "random ops on CUDA: expected float32 or float64, got ",
              r.dtype);
}

// ---- host side: the conversions of the CPU kernel and of the ops' launch parameters ----

// Dispatch over the floating dtypes, including the 16-bit ones (generated through float).
#define EMBER_RANDOM_FLOATING_CASES(...) EMBER_FLOATING_CASES(__VA_ARGS__) EMBER_HALF_CASES(__VA_ARGS__)
#define EMBER_RANDOM_DISPATCH_FLOATING(dtype, opname, ...) \
  EMBER_DISPATCH_CASES(dtype, EMBER_RANDOM_FLOATING_CASES, opname, ": expected a floating-point dtype, got ", __VA_ARGS__)

// The largest T strictly between `from` and `to`, nearest to `to` (from < to). Used to keep
// uniform_ inside [from, to) when from + (to - from) * u rounds up to `to` in T.
template <typename T>
T below(T to, T from) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return std::nextafter(to, from);
  } else {
    // 16-bit sign-magnitude patterns: one unit toward `from`, which is below `to`.
    T t = to;
    float f = static_cast<float>(to);
    if (f > 0) {
      t.bits = static_cast<uint16_t>(t.bits - 1);
    } else if (f == 0) {
      t.bits = 0x8001u;  // the smallest negative subnormal
    } else {
      t.bits = static_cast<uint16_t>(t.bits + 1);
    }
    return t;
  }
}

}  // namespace ember::kernels
