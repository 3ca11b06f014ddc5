// The CPU emulation of the multi-tensor launches (Note [Multi-tensor launches] in
// core/kernels/multi_tensor.h): the chunk table and MultiTensorKernel visit every element of
// every tensor once for any chunk size and grid, and the Adam/AdamW, SGD, scaling and norm
// functors the CUDA launchers run give what the CPU ops give on the same inputs (bit for bit
// for the updates and the scaling: the per-element math is the same functor). Runs everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/kernels/launch.h"
#include "core/kernels/multi_tensor.h"
#include "core/kernels/norm.h"
#include "core/kernels/optim.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"
#include "core/ops/random.h"

namespace ember {
namespace {
using kernels::MultiTensorChunk;
using kernels::MultiTensorEntry;

struct Grid {
  unsigned threads;
  int64_t max_blocks;
};
// One block per chunk, fewer blocks than chunks (blocks stride), fewer threads than a chunk.
const Grid kGrids[] = {{256, kernels::kMaxLaunchBlocks}, {32, 2}, {7, 3}, {1, 1}};
const int64_t kChunks[] = {1, 7, 64, kernels::kMultiTensorChunk};

template <typename Op>
void run_emulated(const Op& op, const std::vector<MultiTensorEntry>& entries, int64_t chunk, const Grid& grid) {
  const std::vector<MultiTensorChunk> chunks = kernels::multi_tensor_chunks(entries, chunk);
  const int64_t n = static_cast<int64_t>(chunks.size());
  kernels::emulate_launch(kernels::multi_tensor_config("test", n, grid.threads, grid.max_blocks),
                          kernels::MultiTensorKernel<Op>{op, entries.data(), chunks.data(), n});
}

std::string where(int64_t chunk, const Grid& g) {
  return "chunk=" + std::to_string(chunk) + " threads=" + std::to_string(g.threads) +
         " max_blocks=" + std::to_string(g.max_blocks);
}

// Counts visits of element i of the int array in list 0; out-of-range visits separately.
struct CountOp {
  int* out_of_range;
  void operator()(const MultiTensorEntry& e, int64_t i) const {
    if (i < 0 || i >= e.numel) {
      ++*out_of_range;
    } else {
      ++static_cast<int*>(e.ptr[0])[i];
    }
  }
};

TEST(MultiTensorLaunch, VisitsEveryElementOfEveryTensorOnce) {
  const std::vector<int64_t> numels = {5, 0, 1, 64, 65, 300, 7};
  for (int64_t chunk : kChunks) {
    for (const Grid& g : kGrids) {
      std::vector<std::vector<int>> counts;
      std::vector<MultiTensorEntry> entries;
      for (int64_t n : numels) counts.emplace_back(static_cast<size_t>(n), 0);
      for (size_t t = 0; t < numels.size(); ++t) {
        MultiTensorEntry e;
        e.ptr[0] = counts[t].data();
        e.numel = numels[t];
        entries.push_back(e);
      }
      int bad = 0;
      run_emulated(CountOp{&bad}, entries, chunk, g);
      EXPECT_EQ(bad, 0) << where(chunk, g);
      for (size_t t = 0; t < numels.size(); ++t) {
        for (size_t i = 0; i < counts[t].size(); ++i) {
          ASSERT_EQ(counts[t][i], 1) << "tensor " << t << " element " << i << " " << where(chunk, g);
        }
      }
    }
  }
}

TEST(MultiTensorLaunch, ChunkTableCoversTensorsInOrderWithoutEmptyChunks) {
  std::vector<MultiTensorEntry> entries(3);
  entries[0].numel = 10;
  entries[1].numel = 0;
  entries[2].numel = 4;
  const auto chunks = kernels::multi_tensor_chunks(entries, 4);
  ASSERT_EQ(chunks.size(), 4u);  // 4 + 4 + 2, nothing for the empty tensor, then 4
  const int64_t want[4][3] = {{0, 0, 4}, {0, 4, 4}, {0, 8, 2}, {2, 0, 4}};
  for (size_t c = 0; c < chunks.size(); ++c) {
    EXPECT_EQ(chunks[c].tensor, want[c][0]) << c;
    EXPECT_EQ(chunks[c].begin, want[c][1]) << c;
    EXPECT_EQ(chunks[c].len, want[c][2]) << c;
  }
  EXPECT_EQ(kernels::multi_tensor_config("k", 0).grid.x, 1u);
  EXPECT_EQ(kernels::multi_tensor_config("k", 5).grid.x, 5u);
  EXPECT_EQ(kernels::multi_tensor_config("k", 5, 32, 2).grid.x, 2u);
}

std::vector<Tensor> clones(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(native::clone(t));
  return out;
}

void expect_bitwise(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t t = 0; t < got.size(); ++t) {
    ASSERT_EQ(got[t].numel(), want[t].numel()) << what;
    const size_t bytes = static_cast<size_t>(got[t].numel()) * element_size(got[t].dtype());
    if (bytes == 0) continue;  // an empty tensor may have no data pointer; memcmp(nullptr, ...) is UB
    EXPECT_EQ(std::memcmp(got[t].raw_data(), want[t].raw_data(), bytes), 0) << what << " tensor " << t;
  }
}

// Tensors of several sizes (one empty, one spanning chunks), values from randn.
std::vector<Tensor> random_tensors(DType dt, double scale = 1.0, double shift = 0.0) {
  std::vector<Tensor> out;
  for (int64_t n : {37, 1, 0, 130}) out.push_back(native::add(native::mul(native::to(randn({n}), dt), scale), shift));
  return out;
}

template <typename T, bool kCoupled, bool kAmsgrad>
void adam_emulated(const kernels::AdamArgs& a, const std::vector<double>& steps, std::vector<Tensor>& p,
                   const std::vector<Tensor>& g, std::vector<Tensor>& m, std::vector<Tensor>& v,
                   std::vector<Tensor>& vmax, int64_t chunk, const Grid& grid) {
  std::vector<MultiTensorEntry> entries;
  for (size_t t = 0; t < p.size(); ++t) {
    MultiTensorEntry e;
    e.ptr[0] = p[t].raw_data();
    e.ptr[1] = g[t].raw_data();
    e.ptr[2] = m[t].raw_data();
    e.ptr[3] = v[t].raw_data();
    if (kAmsgrad) e.ptr[4] = vmax[t].raw_data();
    e.numel = p[t].numel();
    const kernels::AdamStepTerms terms = kernels::adam_step_terms(a, steps[t]);
    e.arg[0] = terms.neg_step_size;
    e.arg[1] = terms.bc2_sqrt;
    entries.push_back(e);
  }
  run_emulated(kernels::AdamMultiF<T, kCoupled, kAmsgrad>{kernels::make_adam_step<T, kCoupled, kAmsgrad>(a)}, entries,
               chunk, grid);
}

template <typename T>
void check_adam(DType dt) {
  struct Case {
    double weight_decay;
    bool decoupled, amsgrad, maximize;
  };
  const Case cases[] = {{0.0, false, false, false}, {0.1, false, false, true}, {0.1, true, true, false},
                        {0.0, false, true, true}, {0.05, false, true, false}};
  const std::vector<double> steps = {1, 3, 2, 10};  // per tensor: bias corrections differ
  for (const Case& c : cases) {
    const kernels::AdamArgs a{.lr = 0.01, .weight_decay = c.weight_decay, .maximize = c.maximize, .decoupled = c.decoupled};
    const std::vector<Tensor> p0 = random_tensors(dt), g = random_tensors(dt), m0 = random_tensors(dt, 0.1);
    const std::vector<Tensor> v0 = random_tensors(dt, 0.0, 0.5), vmax0 = random_tensors(dt, 0.0, 0.7);
    std::vector<Tensor> pw = clones(p0), mw = clones(m0), vw = clones(v0), vmaxw = clones(vmax0);
    native::adam_update_(pw, g, mw, vw, c.amsgrad ? vmaxw : std::vector<Tensor>{}, steps, a);
    for (int64_t chunk : kChunks) {
      for (const Grid& grid : kGrids) {
        std::vector<Tensor> p = clones(p0), m = clones(m0), v = clones(v0), vmax = clones(vmax0);
        const bool coupled = !c.decoupled && c.weight_decay != 0.0;
        if (coupled && c.amsgrad) adam_emulated<T, true, true>(a, steps, p, g, m, v, vmax, chunk, grid);
        if (coupled && !c.amsgrad) adam_emulated<T, true, false>(a, steps, p, g, m, v, vmax, chunk, grid);
        if (!coupled && c.amsgrad) adam_emulated<T, false, true>(a, steps, p, g, m, v, vmax, chunk, grid);
        if (!coupled && !c.amsgrad) adam_emulated<T, false, false>(a, steps, p, g, m, v, vmax, chunk, grid);
        const std::string what = std::string(dtype_name(dt)) + " wd=" + std::to_string(c.weight_decay) +
                                 " decoupled=" + std::to_string(c.decoupled) + " amsgrad=" +
                                 std::to_string(c.amsgrad) + " maximize=" + std::to_string(c.maximize) + " " +
                                 where(chunk, grid);
        expect_bitwise(p, pw, "param " + what);
        expect_bitwise(m, mw, "exp_avg " + what);
        expect_bitwise(v, vw, "exp_avg_sq " + what);
        if (c.amsgrad) expect_bitwise(vmax, vmaxw, "max_exp_avg_sq " + what);
      }
    }
  }
}

TEST(MultiTensorLaunch, AdamMatchesTheCpuStepBitForBit) {
  manual_seed(11);
  check_adam<float>(kFloat32);
  check_adam<double>(kFloat64);
}

template <typename T>
void check_sgd(DType dt) {
  struct Case {
    double momentum, dampening, weight_decay;
    bool nesterov, maximize;
  };
  const Case cases[] = {{0.0, 0.0, 0.0, false, false}, {0.9, 0.0, 0.01, true, false}, {0.9, 0.3, 0.0, false, true},
                        {0.5, 0.0, 0.1, false, false}};
  const std::vector<bool> init = {true, false, true, false};  // first step for some buffers only
  for (const Case& c : cases) {
    const kernels::SgdArgs a{.lr = 0.1,
                             .momentum = c.momentum,
                             .dampening = c.dampening,
                             .weight_decay = c.weight_decay,
                             .nesterov = c.nesterov,
                             .maximize = c.maximize};
    const bool has_buf = c.momentum != 0.0;
    const std::vector<Tensor> p0 = random_tensors(dt), g = random_tensors(dt), b0 = random_tensors(dt, 0.3);
    std::vector<Tensor> pw = clones(p0), bw = clones(b0);
    native::sgd_update_(pw, g, has_buf ? bw : std::vector<Tensor>{}, init, a);
    for (int64_t chunk : kChunks) {
      for (const Grid& grid : kGrids) {
        std::vector<Tensor> p = clones(p0), b = clones(b0);
        std::vector<MultiTensorEntry> entries;
        for (size_t t = 0; t < p.size(); ++t) {
          MultiTensorEntry e;
          e.ptr[0] = p[t].raw_data();
          e.ptr[1] = g[t].raw_data();
          if (has_buf) e.ptr[2] = b[t].raw_data();
          e.numel = p[t].numel();
          e.arg[0] = has_buf && init[t] ? 1.0 : 0.0;
          entries.push_back(e);
        }
        run_emulated(kernels::SgdMultiF<T>{kernels::make_sgd_step<T>(a, has_buf, false)}, entries, chunk, grid);
        const std::string what = std::string(dtype_name(dt)) + " momentum=" + std::to_string(c.momentum) +
                                 " nesterov=" + std::to_string(c.nesterov) + " " + where(chunk, grid);
        expect_bitwise(p, pw, "param " + what);
        if (has_buf) expect_bitwise(b, bw, "momentum_buffer " + what);
      }
    }
  }
}

TEST(MultiTensorLaunch, SgdMatchesTheCpuStepBitForBit) {
  manual_seed(12);
  check_sgd<float>(kFloat32);
  check_sgd<double>(kFloat64);
}

std::vector<MultiTensorEntry> norm_entries(const std::vector<Tensor>& ts) {
  std::vector<MultiTensorEntry> entries;
  for (const Tensor& t : ts) {
    MultiTensorEntry e;
    e.ptr[0] = t.raw_data();
    e.numel = t.numel();
    e.is_f64 = t.dtype() == kFloat64;
    entries.push_back(e);
  }
  return entries;
}

TEST(MultiTensorLaunch, ScaleMatchesScaleAllBitForBit) {
  manual_seed(13);
  std::vector<Tensor> ts = random_tensors(kFloat32);
  for (const Tensor& t : random_tensors(kFloat64)) ts.push_back(t);
  std::vector<Tensor> want = clones(ts);
  native::scale_all_(want, 0.37);
  for (int64_t chunk : kChunks) {
    for (const Grid& grid : kGrids) {
      std::vector<Tensor> got = clones(ts);
      run_emulated(kernels::ScaleMultiF{0.37}, norm_entries(got), chunk, grid);
      expect_bitwise(got, want, "scale " + where(chunk, grid));
    }
  }
}

// What the CUDA launcher's CUB reduction computes, in lane order: NormTermF over the virtual
// lanes of the chunk table, combined from the identity.
double emulated_norm(const std::vector<Tensor>& ts, double p, int64_t chunk) {
  const std::vector<MultiTensorEntry> entries = norm_entries(ts);
  const std::vector<MultiTensorChunk> chunks = kernels::multi_tensor_chunks(entries, chunk);
  const kernels::NormReduce kind = kernels::norm_reduce_kind(p);
  const kernels::NormTermF term{entries.data(), chunks.data(), chunk, p, kind};
  const kernels::NormCombineF combine{kind};
  double acc = kernels::norm_identity(kind);
  for (int64_t v = 0; v < static_cast<int64_t>(chunks.size()) * chunk; ++v) acc = combine(acc, term(v));
  return kernels::finish_norm(acc, p);
}

TEST(MultiTensorLaunch, NormTermsReduceToTheCpuTotalNorm) {
  manual_seed(14);
  std::vector<Tensor> ts = random_tensors(kFloat32, 2.0, 0.5);
  for (const Tensor& t : random_tensors(kFloat64, 3.0)) ts.push_back(t);
  for (double p : {1.0, 2.0, 3.0, 0.5, double(INFINITY), -double(INFINITY)}) {
    const double want = native::total_norm(ts, p);
    for (int64_t chunk : kChunks) {
      // Padding lanes past a chunk's end are the identity: without that the -inf norm (min |x|)
      // would come out 0 and sums would read past the tensors.
      EXPECT_NEAR(emulated_norm(ts, p, chunk), want, 1e-12 * std::fabs(want) + 1e-300)
          << "p=" << p << " chunk=" << chunk;
    }
  }
}

TEST(MultiTensorLaunch, NormPropagatesNanForEveryNormType) {
  std::vector<Tensor> ts = {from_vector<float>({1.0f, 2.0f}, {2}),
                            from_vector<double>({3.0, NAN, 0.5}, {3})};
  for (double p : {1.0, 2.0, 3.0, double(INFINITY), -double(INFINITY)}) {
    EXPECT_TRUE(std::isnan(native::total_norm(ts, p))) << "cpu p=" << p;
    for (int64_t chunk : kChunks) EXPECT_TRUE(std::isnan(emulated_norm(ts, p, chunk))) << "p=" << p << " " << chunk;
  }
}

}  // namespace
}  // namespace ember
