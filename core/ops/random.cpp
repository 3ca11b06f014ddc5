// Random tensors: checks, output allocation, and the per-block drivers over the Philox stream
// on CPU; on CUDA the functors of core/kernels/random.h, which write the same numbers. The math per block is in core/kernels/philox.h (shared with CUDA), and every element's
// numbers come from a fixed block (Note [Philox stream layout]), so results do not depend on the
// thread count. All checks run before the generator advances or any output is written.
#include "core/ops/random.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/kernels/philox.h"
#include "core/kernels/random.h"
#include "core/ops/detail/plan.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/thread_pool.h"

namespace ember {

namespace {

using kernels::PhiloxBlock;

constexpr int64_t kGrainBlocks = 2048;  // Philox blocks per parallel chunk (~8k floats)

// Dispatch over the floating dtypes, including the 16-bit ones (generated through float).
#define EMBER_RANDOM_DISPATCH_FLOATING(dtype, opname, ...)                                            \
  [&] {                                                                                               \
    switch (dtype) {                                                                                  \
      EMBER_DTYPE_CASE(::ember::DType::Float32, float, __VA_ARGS__)                                   \
      EMBER_DTYPE_CASE(::ember::DType::Float64, double, __VA_ARGS__)                                  \
      EMBER_DTYPE_CASE(::ember::DType::BFloat16, ::ember::BFloat16, __VA_ARGS__)                      \
      EMBER_DTYPE_CASE(::ember::DType::Float16, ::ember::Half, __VA_ARGS__)                           \
      default: break;                                                                                 \
    }                                                                                                 \
    EMBER_THROW(::ember::TypeError, opname, ": expected a floating-point dtype, got ", dtype);        \
  }()

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

template <typename T>
T to_scalar(double v) {
  if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

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

Generator& resolve_generator(Generator* gen, Device device, const char* op) {
  if (gen == nullptr) return default_generator(device);
  EMBER_CHECK_T(ValueError, gen->device().type == device.type, op, ": expected a generator for device type ",
                device.is_cuda() ? "cuda" : "cpu", " but got one for ", gen->device().is_cuda() ? "cuda" : "cpu");
  return *gen;
}

// On CUDA the floating fills run for float32 and float64 (checked before the generator moves).
void check_cuda_floating(Device device, DType dtype, const char* op) {
  EMBER_CHECK_T(TypeError, !device.is_cuda() || dtype == kFloat32 || dtype == kFloat64, op,
                ": on CUDA expected float32 or float64, got ", dtype);
}

// Runs r (a fill reserved from the generator) on t's CUDA device: into t when contiguous,
// otherwise into a contiguous temporary that is then copied into t's layout.
void fill_cuda(Tensor& t, kernels::RandomLaunch r, const char* op) {
  Tensor dst = t.is_contiguous() ? t : empty(t.sizes(), TensorOptions(t.dtype()).device(t.device()));
  r.dtype = t.dtype();
  r.out = dst.raw_data();
  r.t.n = t.numel();
  native::detail::require_cuda(op).random(r, t.device().index);
  if (!t.is_contiguous()) native::copy_(t, dst);
}

kernels::RandomTarget target(PhiloxState st) {
  kernels::RandomTarget t;
  t.seed = st.seed;
  t.offset = st.offset;
  return t;
}

/// Calls body(i, block_samples[i % kPerBlock]) for every i in [0, n), where block_samples are
/// produced by sample(PhiloxBlock, double*) from block i / kPerBlock of `state`. Parallel over
/// blocks; each element's value depends only on (state, i).
template <int kPerBlock, typename Sample, typename Body>
void for_each_sample(int64_t n, PhiloxState state, const Sample& sample, const Body& body) {
  int64_t num_blocks = (n + kPerBlock - 1) / kPerBlock;
  parallel_for(0, num_blocks, kGrainBlocks, [&](int64_t lo, int64_t hi) {
    double s[kPerBlock];
    for (int64_t b = lo; b < hi; ++b) {
      sample(kernels::philox_block(state.seed, state.offset, static_cast<uint64_t>(b)), s);
      int64_t i0 = b * kPerBlock;
      int cnt = n - i0 < kPerBlock ? static_cast<int>(n - i0) : kPerBlock;
      for (int k = 0; k < cnt; ++k) body(i0 + k, s[k]);
    }
  });
}

/// Calls fn(linear_index, element_offset) for every element of `t` in row-major order.
template <typename Fn>
void for_each_offset(const Tensor& t, const Fn& fn) {
  const IntList& sizes = t.sizes();
  const IntList& strides = t.strides();
  int64_t n = t.numel();
  size_t nd = sizes.size();
  std::vector<int64_t> idx(nd, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    fn(i, off);
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] < sizes[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (sizes[d] - 1);
      idx[d] = 0;
    }
  }
}

/// Writes value(i) (a double) into element i of `t` (any layout), in parallel when contiguous.
/// `kPerBlock` and `sample` define the stream; see for_each_sample.
template <typename T, int kPerBlock, typename Sample, typename Map>
void fill_from_stream(Tensor& t, PhiloxState state, const Sample& sample, const Map& map) {
  int64_t n = t.numel();
  T* data = static_cast<T*>(t.raw_data());
  if (t.is_contiguous()) {
    for_each_sample<kPerBlock>(n, state, sample, [&](int64_t i, double s) { data[i] = map(s); });
    return;
  }
  std::vector<T> tmp(static_cast<size_t>(n));
  for_each_sample<kPerBlock>(n, state, sample, [&](int64_t i, double s) { tmp[static_cast<size_t>(i)] = map(s); });
  for_each_offset(t, [&](int64_t i, int64_t off) { data[off] = tmp[static_cast<size_t>(i)]; });
}

uint64_t blocks_for(int64_t n, int per_block) { return static_cast<uint64_t>((n + per_block - 1) / per_block); }

// Fills a floating tensor with U[from, to) (from <= to, both finite; checked by callers).
void fill_uniform(Tensor& t, double from, double to, Generator& gen) {
  EMBER_RANDOM_DISPATCH_FLOATING(t.dtype(), "uniform_", [&] {
    using S = Samples<scalar_t>;
    if (t.numel() == 0) return;
    PhiloxState st = gen.reserve(blocks_for(t.numel(), S::kPerBlock));
    const scalar_t t_to = to_scalar<scalar_t>(to), t_from = to_scalar<scalar_t>(from);
    const bool guard = from < to;
    const scalar_t top = guard ? below(t_to, t_from) : t_to;
    const double range = to - from;
    if (t.device().is_cuda()) {
      if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, double>) {
        kernels::RandomLaunch r;
        r.op = kernels::RandomOp::kUniform;
        r.t = target(st);
        r.a = from;
        r.b = range;
        r.c = to;
        r.top = static_cast<double>(top);
        r.guard = guard;
        fill_cuda(t, r, "uniform_");
      }
      return;
    }
    fill_from_stream<scalar_t, S::kPerBlock>(t, st, S::uniform, [&](double u) {
      scalar_t v = to_scalar<scalar_t>(from + range * u);
      if (guard && static_cast<double>(v) >= to) v = top;
      return v;
    });
  });
}

void fill_normal(Tensor& t, double mean, double std, Generator& gen) {
  EMBER_RANDOM_DISPATCH_FLOATING(t.dtype(), "normal_", [&] {
    using S = Samples<scalar_t>;
    if (t.numel() == 0) return;
    PhiloxState st = gen.reserve(blocks_for(t.numel(), S::kPerBlock));
    if (t.device().is_cuda()) {
      kernels::RandomLaunch r;
      r.op = kernels::RandomOp::kNormal;
      r.t = target(st);
      r.a = mean;
      r.b = std;
      fill_cuda(t, r, "normal_");
      return;
    }
    fill_from_stream<scalar_t, S::kPerBlock>(t, st, S::normal,
                                             [&](double z) { return to_scalar<scalar_t>(mean + std * z); });
  });
}

// One uint64 per sample (randint, randperm, scalar bernoulli): two samples per block.
void u64_pair(const PhiloxBlock& b, uint64_t out[2]) {
  out[0] = kernels::philox_u64(b, 0);
  out[1] = kernels::philox_u64(b, 1);
}

void finish_requires_grad(Tensor& t, const TensorOptions& options) {
  if (options.requires_grad_) t.requires_grad_(true);
}

}  // namespace

Tensor rand(const IntList& sizes, TensorOptions options, Generator* gen) {
  EMBER_CHECK_T(TypeError, is_floating_point(options.dtype_), "rand: expected a floating-point dtype, got ",
                options.dtype_);
  check_cuda_floating(options.device_, options.dtype_, "rand");
  Generator& g = resolve_generator(gen, options.device_, "rand");
  Tensor t = empty(sizes, options.requires_grad(false));
  fill_uniform(t, 0.0, 1.0, g);
  finish_requires_grad(t, options);
  return t;
}

Tensor randn(const IntList& sizes, TensorOptions options, Generator* gen) {
  EMBER_CHECK_T(TypeError, is_floating_point(options.dtype_), "randn: expected a floating-point dtype, got ",
                options.dtype_);
  check_cuda_floating(options.device_, options.dtype_, "randn");
  Generator& g = resolve_generator(gen, options.device_, "randn");
  Tensor t = empty(sizes, options.requires_grad(false));
  fill_normal(t, 0.0, 1.0, g);
  finish_requires_grad(t, options);
  return t;
}

Tensor randint(int64_t low, int64_t high, const IntList& sizes, TensorOptions options, Generator* gen) {
  EMBER_CHECK_T(ValueError, low < high, "randint: expected low < high, got low=", low, ", high=", high);
  DType dt = options.dtype_;
  EMBER_CHECK_T(TypeError, dt == kInt64 || dt == kInt32 || dt == kFloat32 || dt == kFloat64,
                "randint: expected dtype int64, int32, float32 or float64, got ", dt);
  if (dt == kInt32) {
    EMBER_CHECK_T(ValueError,
                  low >= std::numeric_limits<int32_t>::min() &&
                      high - 1 <= std::numeric_limits<int32_t>::max(),
                  "randint: [", low, ", ", high, ") does not fit dtype int32");
  }
  Generator& g = resolve_generator(gen, options.device_, "randint");
  Tensor t = empty(sizes, options.requires_grad(false));
  int64_t n = t.numel();
  if (n > 0) {
    const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
    PhiloxState st = g.reserve(blocks_for(n, 2));
    if (t.device().is_cuda()) {
      kernels::RandomLaunch r;
      r.op = kernels::RandomOp::kRandint;
      r.t = target(st);
      r.low = low;
      r.range = range;
      fill_cuda(t, r, "randint");
      finish_requires_grad(t, options);
      return t;
    }
    auto run = [&](auto* data) {
      using T = std::remove_pointer_t<decltype(data)>;
      int64_t num_blocks = static_cast<int64_t>(blocks_for(n, 2));
      parallel_for(0, num_blocks, kGrainBlocks, [&](int64_t lo, int64_t hi) {
        uint64_t r[2];
        for (int64_t b = lo; b < hi; ++b) {
          u64_pair(kernels::philox_block(st.seed, st.offset, static_cast<uint64_t>(b)), r);
          for (int k = 0; k < 2 && 2 * b + k < n; ++k) {
            auto v = static_cast<int64_t>(static_cast<uint64_t>(low) + kernels::mulhi_u64(r[k], range));
            data[2 * b + k] = static_cast<T>(v);
          }
        }
      });
    };
    switch (dt) {
      case DType::Int64: run(static_cast<int64_t*>(t.raw_data())); break;
      case DType::Int32: run(static_cast<int32_t*>(t.raw_data())); break;
      case DType::Float32: run(static_cast<float*>(t.raw_data())); break;
      default: run(static_cast<double*>(t.raw_data())); break;
    }
  }
  finish_requires_grad(t, options);
  return t;
}

namespace {
// A tensor on the CPU device `host` holding a permutation of 0..n-1 in dtype dt from g's stream.
Tensor randperm_from(int64_t n, DType dt, Device host, Generator& g);
}  // namespace

Tensor randperm(int64_t n, TensorOptions options, Generator* gen) {
  EMBER_CHECK_T(ValueError, n >= 0, "randperm: expected n >= 0, got ", n);
  DType dt = options.dtype_;
  EMBER_CHECK_T(TypeError, dt == kInt64 || dt == kInt32 || dt == kFloat32 || dt == kFloat64,
                "randperm: expected dtype int64, int32, float32 or float64, got ", dt);
  EMBER_CHECK_T(ValueError, dt != kInt32 || n - 1 <= std::numeric_limits<int32_t>::max(),
                "randperm: n=", n, " is too large for dtype int32");
  EMBER_CHECK_T(ValueError, dt != kFloat32 || n <= (int64_t{1} << 24),
                "randperm: n=", n, " is too large for dtype float32 (values above 2^24 are not exact)");
  Generator& g = resolve_generator(gen, options.device_, "randperm");
  // On CUDA, Fisher-Yates (sequential) runs on the host over the CUDA generator's reserved
  // stream, the numbers a CPU generator in that state gives, and the result is copied over.
  Tensor t = randperm_from(n, dt, options.device_.is_cuda() ? Device::cpu() : options.device_, g);
  if (options.device_.is_cuda()) t = native::to(t, options.device_);
  finish_requires_grad(t, options);
  return t;
}

namespace {

Tensor randperm_from(int64_t n, DType dt, Device host, Generator& g) {
  Tensor t = empty({n}, TensorOptions(dt).device(host));
  if (n > 0) {
    // Fisher-Yates: step k (k = 0 .. n-2) swaps position i = n-1-k with j uniform in [0, i],
    // using the k-th uint64 of the stream (Note [Philox stream layout]).
    std::vector<int64_t> perm(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = i;
    PhiloxState st = g.reserve(blocks_for(n - 1, 2));
    uint64_t r[2] = {0, 0};
    for (int64_t k = 0; k < n - 1; ++k) {
      if (k % 2 == 0) u64_pair(kernels::philox_block(st.seed, st.offset, static_cast<uint64_t>(k / 2)), r);
      int64_t i = n - 1 - k;
      auto j = static_cast<int64_t>(kernels::mulhi_u64(r[k % 2], static_cast<uint64_t>(i) + 1));
      std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
    }
    auto write = [&](auto* data) {
      for (int64_t i = 0; i < n; ++i) data[i] = static_cast<std::remove_pointer_t<decltype(data)>>(perm[i]);
    };
    switch (dt) {
      case DType::Int64: std::memcpy(t.raw_data(), perm.data(), perm.size() * sizeof(int64_t)); break;
      case DType::Int32: write(static_cast<int32_t*>(t.raw_data())); break;
      case DType::Float32: write(static_cast<float*>(t.raw_data())); break;
      default: write(static_cast<double*>(t.raw_data())); break;
    }
  }
  return t;
}

}  // namespace

namespace {

// bernoulli(p) on CUDA: p validated by a check kernel (the CPU path's ValueError), then the
// uniforms of p's dtype as on CPU (Samples<float> / Samples<double>).
Tensor bernoulli_cuda(const Tensor& p, Generator* gen) {
  check_cuda_floating(p.device(), p.dtype(), "bernoulli");
  Tensor pc = native::contiguous(p);
  const int64_t n = pc.numel();
  Tensor slot = empty({1}, TensorOptions(kInt64).device(p.device()));
  const int64_t bad = native::detail::require_cuda("bernoulli")
                          .first_invalid_probability(pc.dtype(), pc.raw_data(), n, slot.raw_data(), p.device().index);
  if (bad >= 0) {
    const double v = native::reshape(pc, {-1}).to_vector<double>()[static_cast<size_t>(bad)];
    EMBER_THROW(ValueError, "bernoulli: expected all probabilities in [0, 1], got ", v, " at flat index ", bad,
                " of a tensor of shape ", p.sizes());
  }
  Generator& g = resolve_generator(gen, p.device(), "bernoulli");
  Tensor out = empty(p.sizes(), TensorOptions(p.dtype()).device(p.device()));
  if (n == 0) return out;
  kernels::RandomLaunch r;
  r.op = kernels::RandomOp::kBernoulliTensor;
  r.t = target(g.reserve(blocks_for(n, p.dtype() == kFloat64 ? 2 : 4)));
  r.p = pc.raw_data();
  fill_cuda(out, r, "bernoulli");
  return out;
}

}  // namespace

Tensor bernoulli(const Tensor& p, Generator* gen) {
  if (p.device().is_cuda()) return bernoulli_cuda(p, gen);
  return EMBER_RANDOM_DISPATCH_FLOATING(p.dtype(), "bernoulli", [&]() -> Tensor {
    // Read p in row-major order (any layout) and validate every value before drawing.
    int64_t n = p.numel();
    const scalar_t* pd = static_cast<const scalar_t*>(p.raw_data());
    std::vector<double> probs(static_cast<size_t>(n));
    for_each_offset(p, [&](int64_t i, int64_t off) { probs[static_cast<size_t>(i)] = static_cast<double>(pd[off]); });
    for (int64_t i = 0; i < n; ++i) {
      double v = probs[static_cast<size_t>(i)];
      EMBER_CHECK_T(ValueError, v >= 0.0 && v <= 1.0, "bernoulli: expected all probabilities in [0, 1], got ", v,
                    " at flat index ", i, " of a tensor of shape ", p.sizes());
    }
    Generator& g = resolve_generator(gen, p.device(), "bernoulli");
    Tensor out = empty(p.sizes(), TensorOptions(p.dtype()).device(p.device()));
    if (n == 0) return out;
    scalar_t* od = static_cast<scalar_t*>(out.raw_data());
    const scalar_t one = to_scalar<scalar_t>(1.0), zero = to_scalar<scalar_t>(0.0);
    // float32 / 16-bit p: 24-bit float uniforms (4 per block); float64 p: 53-bit (2 per block).
    using S = Samples<std::conditional_t<std::is_same_v<scalar_t, double>, double, float>>;
    PhiloxState st = g.reserve(blocks_for(n, S::kPerBlock));
    for_each_sample<S::kPerBlock>(n, st, S::uniform, [&](int64_t i, double u) {
      od[i] = u < probs[static_cast<size_t>(i)] ? one : zero;
    });
    return out;
  });
}

Tensor bernoulli(const IntList& sizes, double p, TensorOptions options, Generator* gen) {
  EMBER_CHECK_T(ValueError, p >= 0.0 && p <= 1.0, "bernoulli: expected p in [0, 1], got ", p);
  Generator& g = resolve_generator(gen, options.device_, "bernoulli");
  Tensor t = empty(sizes, options.requires_grad(false));
  int64_t n = t.numel();
  if (n > 0 && t.device().is_cuda()) {
    kernels::RandomLaunch r;
    r.op = kernels::RandomOp::kBernoulliScalar;
    r.t = target(g.reserve(blocks_for(n, 2)));
    r.a = p;
    fill_cuda(t, r, "bernoulli");
  } else if (n > 0) {
    EMBER_DISPATCH_ALL(t.dtype(), "bernoulli", [&] {
      scalar_t* d = static_cast<scalar_t*>(t.raw_data());
      const scalar_t one = to_scalar<scalar_t>(1.0), zero = to_scalar<scalar_t>(0.0);
      PhiloxState st = g.reserve(blocks_for(n, 2));
      for_each_sample<2>(n, st, kernels::uniform2_double, [&](int64_t i, double u) { d[i] = u < p ? one : zero; });
    });
  }
  finish_requires_grad(t, options);
  return t;
}

Tensor& uniform_(Tensor& self, double from, double to, Generator* gen) {
  EMBER_CHECK_T(TypeError, self.is_floating_point(), "uniform_: expected a floating-point tensor, got ",
                self.dtype());
  check_cuda_floating(self.device(), self.dtype(), "uniform_");
  EMBER_CHECK_T(ValueError, std::isfinite(from) && std::isfinite(to) && std::isfinite(to - from),
                "uniform_: expected finite bounds, got from=", from, ", to=", to);
  EMBER_CHECK_T(ValueError, from <= to, "uniform_: expected from <= to, got from=", from, ", to=", to);
  Generator& g = resolve_generator(gen, self.device(), "uniform_");
  fill_uniform(self, from, to, g);
  self.bump_version();
  return self;
}

Tensor& normal_(Tensor& self, double mean, double std, Generator* gen) {
  EMBER_CHECK_T(TypeError, self.is_floating_point(), "normal_: expected a floating-point tensor, got ",
                self.dtype());
  check_cuda_floating(self.device(), self.dtype(), "normal_");
  EMBER_CHECK_T(ValueError, std::isfinite(mean) && std::isfinite(std) && std >= 0.0,
                "normal_: expected a finite mean and a finite std >= 0, got mean=", mean, ", std=", std);
  Generator& g = resolve_generator(gen, self.device(), "normal_");
  fill_normal(self, mean, std, g);
  self.bump_version();
  return self;
}

}  // namespace ember
