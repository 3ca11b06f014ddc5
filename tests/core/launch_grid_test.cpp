// The CPU emulation of CUDA launch grids (core/kernels/launch.h) and, through it, the CUDA-path
// kernel bodies of the index, softmax and random ops: every functor a CUDA launcher runs is run
// here over every block and thread of grids smaller than, equal to and larger than its work
// (grid-stride tails, sizes that are not a multiple of the block) and compared with the CPU op
// on the same inputs. Runs everywhere, with or without CUDA or a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/generator.h"
#include "core/kernels/class_loss.h"
#include "core/kernels/index.h"
#include "core/kernels/launch.h"
#include "core/kernels/random.h"
#include "core/kernels/softmax.h"
#include "core/ops/detail/index_geometry.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"
#include "core/ops/random.h"
#include "tests/support/launch_grid.h"

namespace ember {
namespace {
using kernels::element_kernel;
using kernels::emulate_launch;
using kernels::launch_config_1d;

using test_support::Grid;
using test_support::kGrids;
using test_support::run_emulated;

// Records every i a launch hands out.
struct CountF {
  int* counts;
  int64_t n;
  int* out_of_range;
  void operator()(int64_t i) const {
    if (i < 0 || i >= n) {
      ++*out_of_range;
    } else {
      ++counts[i];
    }
  }
};

TEST(LaunchGrid, ElementKernelVisitsEveryIndexExactlyOnce) {
  for (int64_t n : {0, 1, 5, 31, 32, 33, 255, 256, 257, 1000, 4099}) {
    for (unsigned threads : {1u, 7u, 32u, 256u}) {
      for (int64_t max_blocks : {int64_t{1}, int64_t{2}, int64_t{3}, kernels::kMaxLaunchBlocks}) {
        std::vector<int> counts(static_cast<size_t>(n), 0);
        int bad = 0;
        run_emulated(CountF{counts.data(), n, &bad}, n, Grid{threads, max_blocks});
        EXPECT_EQ(bad, 0) << "n=" << n << " threads=" << threads << " max_blocks=" << max_blocks;
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(counts[static_cast<size_t>(i)], 1)
              << "i=" << i << " n=" << n << " threads=" << threads << " max_blocks=" << max_blocks;
        }
      }
    }
  }
}

TEST(LaunchGrid, ConfigCoversTheWorkUpToTheBlockCap) {
  EXPECT_EQ(launch_config_1d("k", 0).grid.x, 1u);  // a launch needs one block even for no work
  EXPECT_EQ(launch_config_1d("k", 1).grid.x, 1u);
  EXPECT_EQ(launch_config_1d("k", 256).grid.x, 1u);
  EXPECT_EQ(launch_config_1d("k", 257).grid.x, 2u);
  EXPECT_EQ(launch_config_1d("k", 257).block.x, kernels::kLaunchThreads);
  const int64_t huge = kernels::kMaxLaunchBlocks * 256 * 3 + 1;
  EXPECT_EQ(launch_config_1d("k", huge).grid.x, static_cast<unsigned>(kernels::kMaxLaunchBlocks));
  EXPECT_STREQ(launch_config_1d("my_kernel", 5).name, "my_kernel");
}

TEST(LaunchGrid, EmulationRunsEveryThreadOfEveryBlockIn3D) {
  kernels::LaunchConfig cfg;
  cfg.grid = kernels::Dim3{2, 3, 2};
  cfg.block = kernels::Dim3{4, 1, 3};
  std::set<std::tuple<unsigned, unsigned, unsigned, unsigned, unsigned, unsigned>> seen;
  int calls = 0;
  emulate_launch(cfg, [&](const kernels::LaunchIndex& ix) {
    ++calls;
    EXPECT_EQ(ix.grid_dim.x, 2u);
    EXPECT_EQ(ix.block_dim.z, 3u);
    seen.insert({ix.block_idx.x, ix.block_idx.y, ix.block_idx.z, ix.thread_idx.x, ix.thread_idx.y, ix.thread_idx.z});
    EXPECT_EQ(ix.stride_x(), 8);
    EXPECT_EQ(ix.global_x(), static_cast<int64_t>(ix.block_idx.x) * 4 + ix.thread_idx.x);
  });
  EXPECT_EQ(calls, 2 * 3 * 2 * 4 * 1 * 3);
  EXPECT_EQ(seen.size(), static_cast<size_t>(calls));
}

// ---- index ops ------------------------------------------------------------------------------

template <typename T>
void expect_same(const Tensor& got, const Tensor& want, const char* what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const auto g = got.to_vector<T>(), w = want.to_vector<T>();
  for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], w[i]) << what << " at " << i;
}

// The CPU softmax kernels are vectorized with their own exp (core/kernels/cpu/vec_math.h), so the
// functor (double sums, libm exp) agrees with them to rounding, not bit for bit.
template <typename T>
void expect_near(const Tensor& got, const Tensor& want, const char* what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double tol = std::is_same_v<T, float> ? 2e-6 : 1e-12;
  const auto g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], w[i], tol * (1 + std::fabs(w[i]))) << what << " at " << i;
}

Tensor index_of(const std::vector<int64_t>& v) { return from_vector(v); }

template <typename T>
Tensor sample(const IntList& sizes, DType dtype) {
  // Distinct values (so a wrong element is visible), of any dtype.
  return native::to(native::mul(rand(sizes), 100.0), dtype);
}

// GatherF over `geometry` into a fresh tensor of want's shape, on an emulated grid, against want.
template <typename T>
void expect_gather(const kernels::IndexGeometry& geometry, const Tensor& index, const Tensor& src, const Tensor& want,
                   const Grid& grid, const char* what) {
  Tensor out = empty(want.sizes(), TensorOptions(want.dtype()));
  kernels::GatherF<T> f{geometry, index.data_ptr<int64_t>(), static_cast<const T*>(src.raw_data()),
                        static_cast<T*>(out.raw_data())};
  run_emulated(f, out.numel(), grid);
  expect_same<T>(out, want, what);
}

template <typename T>
void check_index_functors(DType dtype) {
  manual_seed(3);
  for (const Grid& grid : kGrids) {
    // index_select of a non-contiguous source, negative and repeated indices.
    {
      Tensor src = native::transpose(sample<T>({7, 6, 5}, dtype), 0, 2);  // [5, 6, 7]
      Tensor index = index_of({0, -1, 3, 3, 5, -6});
      expect_gather<T>(native::detail::index_select_geometry(src, 1, index.numel()), index, src,
                       native::index_select(src, 1, index), grid, "index_select");
    }
    // gather along the last dim of a transposed input.
    {
      Tensor a = native::transpose(sample<T>({5, 4}, dtype), 0, 1);  // [4, 5]
      Tensor index = from_vector(std::vector<int64_t>{0, 4, -1, 2, 1, -5, 3, 3, 0, 1, 2, 4}, {4, 3});
      expect_gather<T>(native::detail::gather_geometry(a, 1, index.sizes()), index, a, native::gather(a, 1, index), grid,
                       "gather");
    }
    // scatter_add_ with collisions, from a non-contiguous source.
    {
      Tensor self = sample<T>({3, 5}, dtype);
      Tensor src = native::transpose(sample<T>({4, 3}, dtype), 0, 1);  // [3, 4]
      Tensor index = from_vector(std::vector<int64_t>{0, 0, 4, -1, 2, 2, 2, 1, 3, 0, 4, 4}, {3, 4});
      Tensor want = native::scatter_add(self, 1, index, src);
      Tensor got = native::clone(self);
      kernels::ScatterAddF<T> f{native::detail::scatter_add_geometry(got, 1, index.sizes(), src),
                                index.data_ptr<int64_t>(), static_cast<const T*>(src.raw_data()),
                                static_cast<T*>(got.raw_data())};
      run_emulated(f, index.numel(), grid);
      expect_same<T>(got, want, "scatter_add_");
    }
    // index_add_ along dim 0 with repeated and negative indices, into a non-contiguous self.
    {
      Tensor base = sample<T>({3, 5}, dtype);
      Tensor src = native::transpose(sample<T>({3, 4}, dtype), 0, 1);  // [4, 3]
      Tensor index = index_of({4, 0, 4, -1});
      Tensor want = native::clone(native::transpose(base, 0, 1));  // [5, 3]
      native::index_add_(want, 0, index, src);
      Tensor got = native::clone(base);
      Tensor got_t = native::transpose(got, 0, 1);  // a non-contiguous view that the kernel writes through
      kernels::ScatterAddF<T> f{native::detail::index_add_geometry(got_t, 0, src), index.data_ptr<int64_t>(),
                                static_cast<const T*>(src.raw_data()), static_cast<T*>(got_t.raw_data())};
      run_emulated(f, src.numel(), grid);
      expect_same<T>(got_t, want, "index_add_");
    }
  }
}

TEST(LaunchGrid, IndexFunctorsMatchTheCpuOpsFloat32) { check_index_functors<float>(kFloat32); }
TEST(LaunchGrid, IndexFunctorsMatchTheCpuOpsFloat64) { check_index_functors<double>(kFloat64); }
TEST(LaunchGrid, IndexFunctorsMatchTheCpuOpsInt64) { check_index_functors<int64_t>(kInt64); }

// scatter_add_ and index_add_ on 16-bit floats (the CUDA path's; the CPU ops stop at float32):
// small integers, whose sums are exact in bfloat16 and float16, against the float32 op.
template <typename T>
void check_scatter_add_functors_16(DType dtype) {
  manual_seed(5);
  auto ints = [](const IntList& sizes) {  // float32 holding integers in [0, 16)
    return native::to(native::to(native::mul(rand(sizes), 16.0), kInt64), kFloat32);
  };
  for (const Grid& grid : kGrids) {
    {
      Tensor self = ints({3, 5});
      Tensor src = native::transpose(ints({4, 3}), 0, 1);  // [3, 4]
      Tensor index = from_vector(std::vector<int64_t>{0, 0, 4, -1, 2, 2, 2, 1, 3, 0, 4, 4}, {3, 4});
      Tensor want = native::to(native::scatter_add(self, 1, index, src), dtype);
      Tensor got = native::to(self, dtype);
      Tensor src16 = native::to(src, dtype);
      kernels::ScatterAddF<T> f{native::detail::scatter_add_geometry(got, 1, index.sizes(), src16),
                                index.data_ptr<int64_t>(), static_cast<const T*>(src16.raw_data()),
                                static_cast<T*>(got.raw_data())};
      run_emulated(f, index.numel(), grid);
      expect_same<float>(native::to(got, kFloat32), native::to(want, kFloat32), "scatter_add_");
    }
    {
      Tensor base = ints({3, 5});
      Tensor src = native::transpose(ints({3, 4}), 0, 1);  // [4, 3]
      Tensor index = index_of({4, 0, 4, -1});
      Tensor want = native::clone(native::transpose(base, 0, 1));  // [5, 3]
      native::index_add_(want, 0, index, src);
      Tensor got = native::to(base, dtype);
      Tensor got_t = native::transpose(got, 0, 1);
      Tensor src16 = native::to(src, dtype);
      kernels::ScatterAddF<T> f{native::detail::index_add_geometry(got_t, 0, src16), index.data_ptr<int64_t>(),
                                static_cast<const T*>(src16.raw_data()), static_cast<T*>(got_t.raw_data())};
      run_emulated(f, src16.numel(), grid);
      expect_same<float>(native::to(got_t, kFloat32), want, "index_add_");
    }
  }
}

TEST(LaunchGrid, ScatterAddFunctorsAddBFloat16) { check_scatter_add_functors_16<BFloat16>(kBFloat16); }
TEST(LaunchGrid, ScatterAddFunctorsAddFloat16) { check_scatter_add_functors_16<Half>(kFloat16); }

// The step of the CUDA compare-and-swap loop (Note [16-bit atomic add]): the addressed half of
// the word gets the rounded sum, the other half keeps its bits.
template <typename T>
void check_add_to_half_word() {
  const uint16_t lo = T(1.5f).bits, hi = T(-3.0f).bits;
  const uint32_t word = (static_cast<uint32_t>(hi) << 16) | lo;
  const uint32_t low_added = kernels::add_to_half_word<T>(word, 0, T(2.25f));
  EXPECT_EQ(low_added >> 16, hi);
  T got;
  got.bits = static_cast<uint16_t>(low_added & 0xffffu);
  EXPECT_EQ(static_cast<float>(got), 3.75f);
  const uint32_t high_added = kernels::add_to_half_word<T>(word, 16, T(0.5f));
  EXPECT_EQ(high_added & 0xffffu, lo);
  got.bits = static_cast<uint16_t>(high_added >> 16);
  EXPECT_EQ(static_cast<float>(got), -2.5f);
  // Rounded to the 16-bit type: 256 + 1 is 256 in bfloat16 (8 significant bits), 257 in float16.
  const uint32_t big = kernels::add_to_half_word<T>(T(256.0f).bits, 0, T(1.0f));
  got.bits = static_cast<uint16_t>(big);
  EXPECT_EQ(static_cast<float>(got), (std::is_same_v<T, BFloat16> ? 256.0f : 257.0f));
}

TEST(LaunchGrid, HalfWordAddKeepsTheOtherHalfBFloat16) { check_add_to_half_word<BFloat16>(); }
TEST(LaunchGrid, HalfWordAddKeepsTheOtherHalfFloat16) { check_add_to_half_word<Half>(); }

TEST(LaunchGrid, OneHotFunctorMatchesTheCpuOp) {
  Tensor idx = from_vector(std::vector<int64_t>{2, 0, 3, 3, 1, 0, 2}, {7});
  Tensor want = native::one_hot(idx, 5);
  for (const Grid& grid : kGrids) {
    Tensor out = zeros({7, 5}, TensorOptions(kInt64));
    run_emulated(kernels::OneHotF{idx.data_ptr<int64_t>(), 5, out.data_ptr<int64_t>()}, idx.numel(), grid);
    expect_same<int64_t>(out, want, "one_hot");
  }
}

// The pre-launch checks report the first bad position, as the CPU path's sequential check does.
TEST(LaunchGrid, FirstFailureFindsTheFirstBadPositionOnAnyGrid) {
  std::vector<int64_t> v{0, 4, -5, 7, 2, -6, 9};
  auto first_bad = [&](int64_t size, bool allow_negative, const Grid& grid) {
    unsigned long long slot = kernels::kNoFailure;
    kernels::FirstFailureF<kernels::IndexInRange> f{{v.data(), size, allow_negative}, &slot};
    run_emulated(f, static_cast<int64_t>(v.size()), grid);
    return slot;
  };
  for (const Grid& grid : kGrids) {
    EXPECT_EQ(first_bad(5, true, grid), 3u);   // 7 >= 5 (-5 is allowed)
    EXPECT_EQ(first_bad(5, false, grid), 2u);  // -5 < 0
    EXPECT_EQ(first_bad(10, true, grid), kernels::kNoFailure);
    EXPECT_EQ(first_bad(10, false, grid), 2u);
  }
  std::vector<double> p{0.0, 1.0, 0.5, std::nan(""), 1.5};
  for (const Grid& grid : kGrids) {
    unsigned long long slot = kernels::kNoFailure;
    run_emulated(kernels::FirstFailureF<kernels::ProbabilityInRange<double>>{{p.data()}, &slot}, 5, grid);
    EXPECT_EQ(slot, 3u);  // NaN is not a probability
  }
}

// ---- softmax --------------------------------------------------------------------------------

template <typename T>
void check_softmax_functors(DType dtype) {
  manual_seed(5);
  Tensor x = native::to(randn({3, 4, 5}), dtype);
  for (int64_t dim : {0, 1, 2}) {
    kernels::LineGeometry g;
    g.n = x.sizes()[dim];
    for (int64_t d = dim + 1; d < 3; ++d) g.inner *= x.sizes()[d];
    const int64_t lines = x.numel() / g.n;
    for (bool log : {false, true}) {
      Tensor want = log ? native::log_softmax(x, dim) : native::softmax(x, dim);
      Tensor grad = native::to(randn({3, 4, 5}), dtype);
      Tensor want_grad = log ? native::log_softmax_backward(grad, want, dim) : native::softmax_backward(grad, want, dim);
      for (const Grid& grid : kGrids) {
        Tensor out = empty(x.sizes(), TensorOptions(dtype));
        run_emulated(kernels::SoftmaxLineF<T>{g, log, x.data_ptr<T>(), out.data_ptr<T>()}, lines, grid);
        expect_near<T>(out, want, "softmax forward");
        Tensor gi = empty(x.sizes(), TensorOptions(dtype));
        run_emulated(kernels::SoftmaxBackwardLineF<T>{g, log, grad.data_ptr<T>(), want.data_ptr<T>(), gi.data_ptr<T>()},
                     lines, grid);
        expect_near<T>(gi, want_grad, "softmax backward");
      }
    }
  }
}

TEST(LaunchGrid, SoftmaxFunctorsMatchTheCpuOpsFloat32) { check_softmax_functors<float>(kFloat32); }
TEST(LaunchGrid, SoftmaxFunctorsMatchTheCpuOpsFloat64) { check_softmax_functors<double>(kFloat64); }

// ---- class-index losses ---------------------------------------------------------------------

void expect_near_tol(const Tensor& got, const Tensor& want, double tol, const char* what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  const auto g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], w[i], tol * (1 + std::fabs(w[i]))) << what << " at " << i;
}

template <typename T>
void check_class_loss_functors(DType dtype) {
  manual_seed(9);
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  for (int64_t S : {1, 3}) {  // S == 1 is the CPU's vectorized float32 layout, S == 3 its generic one
    const int64_t N = 4, C = 5, rows = N * S;
    Tensor x = native::to(native::mul(randn({N, C, S}), 2.0), dtype);
    std::vector<int64_t> tv;
    for (int64_t r = 0; r < rows; ++r) tv.push_back(r == 2 ? -100 : (r * 3) % C);
    Tensor target = from_vector(tv, {N, S});
    Tensor weight = native::add(native::to(rand({C}), kFloat64), 0.5);
    for (bool from_logits : {true, false}) {
      for (double ls : {0.0, 0.2}) {
        if (!from_logits && ls > 0) continue;  // nll_loss has no label smoothing
        for (bool weighted : {false, true}) {
          const Tensor w = weighted ? weight : Tensor();
          auto want = native::class_loss_forward(x, target, w, -100, ls, from_logits);
          kernels::ClassLossGeometry g;
          g.N = N;
          g.C = C;
          g.S = S;
          g.target = target.data_ptr<int64_t>();
          g.weight = weighted ? weight.data_ptr<double>() : nullptr;
          g.ignore_index = -100;
          g.label_smoothing = ls;
          g.wc_sum = weighted ? native::sum(weight).item() : static_cast<double>(C);
          for (const Grid& grid : kGrids) {
            Tensor loss = empty({rows}, TensorOptions(kFloat64)), lse = empty({rows}, TensorOptions(kFloat64));
            Tensor rw = empty({rows}, TensorOptions(kFloat64));
            if (from_logits) {
              run_emulated(kernels::CrossEntropyRowF<T>{g, x.data_ptr<T>(), loss.data_ptr<double>(),
                                                        lse.data_ptr<double>(), rw.data_ptr<double>()},
                           rows, grid);
              expect_near_tol(lse, want.lse, tol, "lse");
            } else {
              run_emulated(kernels::NllRowF<T>{g, x.data_ptr<T>(), loss.data_ptr<double>(), rw.data_ptr<double>()},
                           rows, grid);
            }
            expect_near_tol(loss, want.loss, tol, "per-row loss");
            EXPECT_NEAR(native::sum(loss).item(), want.sum, tol * (1 + std::fabs(want.sum)));
            EXPECT_NEAR(native::sum(rw).item(), want.total_weight, 1e-12);

            Tensor ge = native::to(randn({rows}), dtype);
            for (bool per_elem : {true, false}) {
              Tensor want_gx = native::class_loss_backward(x.sizes(), dtype, from_logits ? x : Tensor(), target, w,
                                                           want.lse, per_elem ? ge : Tensor(), 0.75, -100, ls,
                                                           from_logits);
              Tensor gx = zeros(x.sizes(), TensorOptions(dtype));
              const T* gp = per_elem ? ge.data_ptr<T>() : nullptr;
              if (from_logits) {
                Tensor l = native::contiguous(want.lse);
                run_emulated(kernels::CrossEntropyBackwardRowF<T>{g, x.data_ptr<T>(), l.data_ptr<double>(), gp, 0.75,
                                                                  gx.data_ptr<T>()},
                             rows, grid);
              } else {
                run_emulated(kernels::NllBackwardRowF<T>{g, gp, 0.75, gx.data_ptr<T>()}, rows, grid);
              }
              expect_near_tol(gx, want_gx, tol, "input gradient");
            }
          }
        }
      }
    }
  }
}

TEST(LaunchGrid, ClassLossFunctorsMatchTheCpuOpsFloat32) { check_class_loss_functors<float>(kFloat32); }
TEST(LaunchGrid, ClassLossFunctorsMatchTheCpuOpsFloat64) { check_class_loss_functors<double>(kFloat64); }

TEST(LaunchGrid, TargetCheckFindsTheFirstBadTarget) {
  std::vector<int64_t> t{0, -100, 4, 5, -1};
  for (const Grid& grid : kGrids) {
    unsigned long long slot = kernels::kNoFailure;
    run_emulated(kernels::FirstFailureF<kernels::TargetInRange>{{t.data(), 5, -100}, &slot}, 5, grid);
    EXPECT_EQ(slot, 3u);
  }
}

// ---- random ops: the CUDA-path functors produce the CPU stream --------------------------------

// Runs r through visit_random (the CUDA launcher's mapping) on an emulated grid.
void run_random(kernels::RandomLaunch r, void* out, int64_t n, const Grid& grid) {
  r.out = out;
  r.t.n = n;
  kernels::visit_random(r, [&](const auto& f, int64_t blocks) { run_emulated(f, blocks, grid); });
}

kernels::RandomLaunch launch_at(kernels::RandomOp op, DType dtype, uint64_t seed, uint64_t offset, int64_t n) {
  kernels::RandomLaunch r;
  r.t.n = n;
  r.op = op;
  r.dtype = dtype;
  r.t.seed = seed;
  r.t.offset = offset;
  return r;
}

template <typename T>
void check_random_functors(DType dtype) {
  const uint64_t seed = 20261203;
  for (int64_t n : {1, 3, 5, 8, 1001}) {
    for (const Grid& grid : kGrids) {
      Generator gen(seed);
      (void)rand({3}, TensorOptions(dtype), &gen);  // the draws below start at a non-zero offset
      const uint64_t offset = dtype == kFloat64 ? 2 : 1;

      Tensor want = rand({n}, TensorOptions(dtype), &gen);
      Tensor got = empty({n}, TensorOptions(dtype));
      auto r = launch_at(kernels::RandomOp::kUniform, dtype, seed, offset, n);
      r.a = 0.0;
      r.b = 1.0;
      r.c = 1.0;
      r.top = static_cast<double>(std::nextafter(T(1), T(0)));
      r.guard = true;
      run_random(r, got.raw_data(), n, grid);
      expect_same<T>(got, want, "rand");
      uint64_t next = offset + static_cast<uint64_t>(kernels::random_launch_blocks(r));

      want = empty({n}, TensorOptions(dtype));
      normal_(want, 0.5, 2.0, &gen);
      got = empty({n}, TensorOptions(dtype));
      r = launch_at(kernels::RandomOp::kNormal, dtype, seed, next, n);
      r.a = 0.5;
      r.b = 2.0;
      run_random(r, got.raw_data(), n, grid);
      expect_same<T>(got, want, "normal_");
      next += static_cast<uint64_t>(kernels::random_launch_blocks(r));

      want = bernoulli({n}, 0.3, TensorOptions(dtype), &gen);
      got = empty({n}, TensorOptions(dtype));
      r = launch_at(kernels::RandomOp::kBernoulliScalar, dtype, seed, next, n);
      r.a = 0.3;
      run_random(r, got.raw_data(), n, grid);
      expect_same<T>(got, want, "bernoulli(p)");
      next += static_cast<uint64_t>(kernels::random_launch_blocks(r));

      Tensor p = rand({n}, TensorOptions(dtype));  // default generator: not part of gen's stream
      want = bernoulli(p, &gen);
      got = empty({n}, TensorOptions(dtype));
      r = launch_at(kernels::RandomOp::kBernoulliTensor, dtype, seed, next, n);
      r.p = p.raw_data();
      run_random(r, got.raw_data(), n, grid);
      expect_same<T>(got, want, "bernoulli(tensor)");
      next += static_cast<uint64_t>(kernels::random_launch_blocks(r));

      want = randint(-5, 17, {n}, TensorOptions(dtype), &gen);
      got = empty({n}, TensorOptions(dtype));
      r = launch_at(kernels::RandomOp::kRandint, dtype, seed, next, n);
      r.low = -5;
      r.range = 22;
      run_random(r, got.raw_data(), n, grid);
      expect_same<T>(got, want, "randint");
    }
  }
}

TEST(LaunchGrid, RandomFunctorsProduceTheCpuStreamFloat32) { check_random_functors<float>(kFloat32); }
TEST(LaunchGrid, RandomFunctorsProduceTheCpuStreamFloat64) { check_random_functors<double>(kFloat64); }

TEST(LaunchGrid, RandomFunctorsRejectSixteenBitFloatsOnTheCudaPath) {
  auto r = launch_at(kernels::RandomOp::kUniform, kBFloat16, 1, 0, 4);
  EXPECT_THROW(kernels::visit_random(r, [](const auto&, int64_t) {}), TypeError);
}

}  // namespace
}  // namespace ember
