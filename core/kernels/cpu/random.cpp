#include "core/kernels/cpu/random.h"

#include <type_traits>

#include "core/kernels/index.h"
#include "core/kernels/philox.h"
#include "core/thread_pool.h"

namespace ember::kernels::cpu {
namespace {

constexpr int64_t kGrainBlocks = 2048;  // Philox blocks per parallel chunk (~8k floats)

// Per-type layout of the stream: lanes per block and the uniform / normal samples of one block.
template <typename T>
struct Samples {  // float32, bfloat16, float16: one uint32 per sample
  static constexpr int kPerBlock = 4;
  static constexpr int kBits = std::is_same_v<T, float> ? 24 : std::is_same_v<T, BFloat16> ? 8 : 11;
  static void uniform(const PhiloxBlock& b, double out[4]) {
    float u[4];
    kernels::uniform4_float(b, kBits, u);
    for (int k = 0; k < 4; ++k) out[k] = u[k];
  }
  static void normal(const PhiloxBlock& b, double out[4]) {
    float z[4];
    kernels::normal4_float(b, z);
    for (int k = 0; k < 4; ++k) out[k] = z[k];
  }
};
template <>
struct Samples<double> {  // one uint64 per sample
  static constexpr int kPerBlock = 2;
  static void uniform(const PhiloxBlock& b, double out[2]) { kernels::uniform2_double(b, out); }
  static void normal(const PhiloxBlock& b, double out[2]) { kernels::normal2_double(b, out); }
};

/// Calls body(i, block_samples[i % kPerBlock]) for every i in [0, t.n), where block_samples are
/// produced by sample(PhiloxBlock, double*) from block i / kPerBlock of the stream at t.
template <int kPerBlock, typename Sample, typename Body>
void for_each_sample(const RandomTarget& t, const Sample& sample, const Body& body) {
  const int64_t n = t.n;
  const int64_t num_blocks = (n + kPerBlock - 1) / kPerBlock;
  parallel_for(0, num_blocks, kGrainBlocks, [&](int64_t lo, int64_t hi) {
    double s[kPerBlock];
    for (int64_t b = lo; b < hi; ++b) {
      sample(philox_block(t.seed, t.offset, static_cast<uint64_t>(b)), s);
      const int64_t i0 = b * kPerBlock;
      const int cnt = n - i0 < kPerBlock ? static_cast<int>(n - i0) : kPerBlock;
      for (int k = 0; k < cnt; ++k) body(i0 + k, s[k]);
    }
  });
}

}  // namespace

void random_fill(const RandomLaunch& r, int /*device_index*/) {
  const RandomTarget& t = r.t;
  if (t.n <= 0) return;
  switch (r.op) {
    case RandomOp::kUniform:
      return EMBER_RANDOM_DISPATCH_FLOATING(r.dtype, "uniform_", [&] {
        using S = Samples<scalar_t>;
        scalar_t* data = static_cast<scalar_t*>(r.out);
        const scalar_t top = to_scalar<scalar_t>(r.top);
        for_each_sample<S::kPerBlock>(t, S::uniform, [&](int64_t i, double u) {
          scalar_t v = to_scalar<scalar_t>(r.a + r.b * u);
          if (r.guard && static_cast<double>(v) >= r.c) v = top;
          data[i] = v;
        });
      });
    case RandomOp::kNormal:
      return EMBER_RANDOM_DISPATCH_FLOATING(r.dtype, "normal_", [&] {
        using S = Samples<scalar_t>;
        scalar_t* data = static_cast<scalar_t*>(r.out);
        for_each_sample<S::kPerBlock>(t, S::normal,
                                      [&](int64_t i, double z) { data[i] = to_scalar<scalar_t>(r.a + r.b * z); });
      });
    case RandomOp::kBernoulliTensor:
      return EMBER_RANDOM_DISPATCH_FLOATING(r.dtype, "bernoulli", [&] {
        // float32 / 16-bit p: 24-bit float uniforms (4 per block); float64 p: 53-bit (2 per block).
        using S = Samples<std::conditional_t<std::is_same_v<scalar_t, double>, double, float>>;
        const scalar_t* p = static_cast<const scalar_t*>(r.p);
        scalar_t* out = static_cast<scalar_t*>(r.out);
        const scalar_t one = to_scalar<scalar_t>(1.0), zero = to_scalar<scalar_t>(0.0);
        for_each_sample<S::kPerBlock>(t, S::uniform, [&](int64_t i, double u) {
          out[i] = u < static_cast<double>(p[i]) ? one : zero;
        });
      });
    case RandomOp::kBernoulliScalar:
      return EMBER_DISPATCH_ALL(r.dtype, "bernoulli", [&] {
        scalar_t* d = static_cast<scalar_t*>(r.out);
        const scalar_t one = to_scalar<scalar_t>(1.0), zero = to_scalar<scalar_t>(0.0);
        for_each_sample<2>(t, uniform2_double, [&](int64_t i, double u) { d[i] = u < r.a ? one : zero; });
      });
    case RandomOp::kRandint:
      return EMBER_DISPATCH_NUMERIC(r.dtype, "randint", [&] {
        scalar_t* data = static_cast<scalar_t*>(r.out);
        const int64_t num_blocks = (t.n + 1) / 2;
        parallel_for(0, num_blocks, kGrainBlocks, [&](int64_t lo, int64_t hi) {
          for (int64_t b = lo; b < hi; ++b) {
            const PhiloxBlock blk = philox_block(t.seed, t.offset, static_cast<uint64_t>(b));
            for (int k = 0; k < 2 && 2 * b + k < t.n; ++k) {
              const auto v = static_cast<int64_t>(static_cast<uint64_t>(r.low) + mulhi_u64(philox_u64(blk, k), r.range));
              data[2 * b + k] = static_cast<scalar_t>(v);
            }
          }
        });
      });
  }
}

int64_t first_invalid_probability(DType dtype, const void* p, int64_t n, void* /*slot*/, int /*device_index*/) {
  return EMBER_RANDOM_DISPATCH_FLOATING(dtype, "bernoulli", [&]() -> int64_t {
    const ProbabilityInRange<scalar_t> ok{static_cast<const scalar_t*>(p)};
    for (int64_t i = 0; i < n; ++i) {
      if (!ok(i)) return i;
    }
    return -1;
  });
}

}  // namespace ember::kernels::cpu
