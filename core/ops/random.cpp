// Random tensors: checks, output allocation, the generator's reservation and the stubs of
// core/ops/random_stubs.h (kernels: core/kernels/cpu/random.cpp, core/kernels/cuda/random.cu,
// which write the same numbers). Every element's numbers come from a fixed Philox block (Note
// [Philox stream layout]), so results do not depend on the thread count. All checks run before
// the generator advances or any output is written.
#include "core/ops/random.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/kernels/philox.h"
#include "core/kernels/random.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random_stubs.h"

namespace ember {

namespace native {
detail::DispatchStub<RandomFn> random_stub;
detail::DispatchStub<FirstInvalidProbabilityFn> first_invalid_probability_stub;
}  // namespace native

namespace {

using kernels::PhiloxBlock;

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

// Reserves r's Philox blocks from gen and runs r on t's device: into t when contiguous,
// otherwise into a contiguous temporary that is then copied into t's layout.
void fill(Tensor& t, kernels::RandomLaunch r, Generator& gen, const char* op) {
  r.dtype = t.dtype();
  r.t.n = t.numel();
  if (r.t.n == 0) return;
  const PhiloxState st = gen.reserve(static_cast<uint64_t>(kernels::random_launch_blocks(r)));
  r.t.seed = st.seed;
  r.t.offset = st.offset;
  Tensor dst = t.is_contiguous() ? t : empty(t.sizes(), TensorOptions(t.dtype()).device(t.device()));
  r.out = dst.raw_data();
  native::random_stub.kernel(t.device(), op)(r, t.device().index);
  if (!t.is_contiguous()) native::copy_(t, dst);
}

// Fills a floating tensor with U[from, to) (from <= to, both finite; checked by callers).
void fill_uniform(Tensor& t, double from, double to, Generator& gen) {
  kernels::RandomLaunch r;
  r.op = kernels::RandomOp::kUniform;
  r.a = from;
  r.b = to - from;
  r.c = to;
  r.guard = from < to;
  // The largest value of t's dtype below `to`, which a sample that rounds up to `to` becomes.
  r.top = EMBER_RANDOM_DISPATCH_FLOATING(t.dtype(), "uniform_", [&] {
    const scalar_t t_to = kernels::to_scalar<scalar_t>(to), t_from = kernels::to_scalar<scalar_t>(from);
    return static_cast<double>(r.guard ? kernels::below(t_to, t_from) : t_to);
  });
  fill(t, r, gen, "uniform_");
}

void fill_normal(Tensor& t, double mean, double std, Generator& gen) {
  kernels::RandomLaunch r;
  r.op = kernels::RandomOp::kNormal;
  r.a = mean;
  r.b = std;
  fill(t, r, gen, "normal_");
}

uint64_t blocks_for(int64_t n, int per_block) { return static_cast<uint64_t>((n + per_block - 1) / per_block); }

// One uint64 per sample (randint, randperm, scalar bernoulli): two samples per block.
void u64_pair(const PhiloxBlock& b, uint64_t out[2]) {
  out[0] = kernels::philox_u64(b, 0);
  out[1] = kernels::philox_u64(b, 1);
}

void finish_requires_grad(Tensor& t, const TensorOptions& options) {
  if (options.requires_grad_) t.requires_grad_(true);
}

// rand and randn: checks, then a fresh tensor that `fill_standard(t, g)` fills.
template <typename Fill>
Tensor standard_random(const IntList& sizes, const TensorOptions& options, Generator* gen, const char* op,
                       const Fill& fill_standard) {
  EMBER_CHECK_T(TypeError, is_floating_point(options.dtype_), op, ": expected a floating-point dtype, got ",
                options.dtype_);
  check_cuda_floating(options.device_, options.dtype_, op);
  Generator& g = resolve_generator(gen, options.device_, op);
  Tensor t = empty(sizes, options.requires_grad(false));
  fill_standard(t, g);
  finish_requires_grad(t, options);
  return t;
}

}  // namespace

Tensor rand(const IntList& sizes, TensorOptions options, Generator* gen) {
  return standard_random(sizes, options, gen, "rand", [](Tensor& t, Generator& g) { fill_uniform(t, 0.0, 1.0, g); });
}

Tensor randn(const IntList& sizes, TensorOptions options, Generator* gen) {
  return standard_random(sizes, options, gen, "randn", [](Tensor& t, Generator& g) { fill_normal(t, 0.0, 1.0, g); });
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
  kernels::RandomLaunch r;
  r.op = kernels::RandomOp::kRandint;
  r.low = low;
  r.range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  fill(t, r, g, "randint");
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
  // Fisher-Yates (sequential) runs on the host over the generator's reserved stream (on CUDA
  // the numbers a CPU generator in that state gives), and the result is copied to the device.
  Tensor t = native::to(randperm_from(n, dt, Device::cpu(), g), options.device_);
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

Tensor bernoulli(const Tensor& p, Generator* gen) {
  check_cuda_floating(p.device(), p.dtype(), "bernoulli");
  EMBER_CHECK_T(TypeError, is_floating_point(p.dtype()), "bernoulli: expected a floating-point dtype, got ", p.dtype());
  // Every probability is validated (by a check kernel) before the generator moves.
  Tensor pc = native::contiguous(p);
  const int64_t n = pc.numel();
  Tensor slot = empty({1}, TensorOptions(kInt64).device(p.device()));
  const int64_t bad = native::first_invalid_probability_stub.kernel(p.device(), "bernoulli")(
      pc.dtype(), pc.raw_data(), n, slot.raw_data(), p.device().index);
  if (bad >= 0) {
    const double v = native::select(native::reshape(pc, {-1}), 0, bad).item();
    EMBER_THROW(ValueError, "bernoulli: expected all probabilities in [0, 1], got ", v, " at flat index ", bad,
                " of a tensor of shape ", p.sizes());
  }
  Generator& g = resolve_generator(gen, p.device(), "bernoulli");
  Tensor out = empty(p.sizes(), TensorOptions(p.dtype()).device(p.device()));
  kernels::RandomLaunch r;
  r.op = kernels::RandomOp::kBernoulliTensor;
  r.p = pc.raw_data();
  fill(out, r, g, "bernoulli");
  return out;
}

Tensor bernoulli(const IntList& sizes, double p, TensorOptions options, Generator* gen) {
  EMBER_CHECK_T(ValueError, p >= 0.0 && p <= 1.0, "bernoulli: expected p in [0, 1], got ", p);
  Generator& g = resolve_generator(gen, options.device_, "bernoulli");
  Tensor t = empty(sizes, options.requires_grad(false));
  kernels::RandomLaunch r;
  r.op = kernels::RandomOp::kBernoulliScalar;
  r.a = p;
  fill(t, r, g, "bernoulli");
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
