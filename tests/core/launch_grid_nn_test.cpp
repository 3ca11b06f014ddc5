// The CUDA-path kernel bodies of the nn layers, run by the CPU emulation of their launch grids
// (core/kernels/launch.h) over grids smaller than, equal to and larger than the work, and
// compared with the CPU ops on the same inputs: the packed-row gather, Embedding forward and
// its deterministic backward (the CUB radix sort's twin here is std::stable_sort), layer_norm
// forward and backward, and the whole stepwise recurrent layer (core/ops/rnn_stepwise.cpp,
// which CUDA runs over cuBLAS) with emulated cell launches against the CPU engine, every cell
// kind, both directions, with and without bias, float32 and float64. Runs everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/kernels/embedding.h"
#include "core/kernels/gather_rows.h"
#include "core/kernels/launch.h"
#include "core/kernels/layer_norm.h"
#include "core/kernels/rnn_cell.h"
#include "core/ops/detail/rnn_stepwise.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"
#include "core/ops/random.h"
#include "tests/support/launch_grid.h"

namespace ember {
namespace {
using test_support::Grid;
using test_support::grid_name;
using test_support::kGrids;
using test_support::run_emulated;

Tensor seeded_randn(const IntList& sizes, uint64_t seed, DType dt) {
  Generator g(seed);
  return native::to(randn(sizes, TensorOptions(kFloat64), &g), dt);
}

// |got - want| <= tol * (1 + |want|) element-wise (tol 0: bit-equal values).
void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const auto g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (tol == 0) {
      ASSERT_EQ(g[i], w[i]) << what << " at " << i;
    } else {
      ASSERT_NEAR(g[i], w[i], tol * (1 + std::fabs(w[i]))) << what << " at " << i;
    }
  }
}

template <typename T>
T* p(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

// ---- gather_rows ------------------------------------------------------------------------------------

template <typename T>
void check_gather_rows(DType dt) {
  // src [5, 3, 2] viewed as 5 rows of 6; a transposed view, so the op makes it contiguous.
  Tensor src = native::transpose(native::to(seeded_randn({5, 2, 3}, 1, kFloat64), dt), 1, 2);
  const std::vector<int64_t> index = {4, -1, 0, 2, -1, 3, 1};
  for (double fill : {0.0, -1.5}) {
    Tensor want = native::gather_rows(src, index, 5, {7, 6}, fill);
    Tensor sc = native::contiguous(src);
    Tensor idx = from_vector<int64_t>(index);
    Tensor fill_value = full({1}, fill, TensorOptions(dt));
    for (const Grid& g : kGrids) {
      Tensor got = full({7, 6}, 99.0, TensorOptions(dt));
      run_emulated(kernels::GatherRowsF<T>{p<int64_t>(idx), 6, p<T>(sc), p<T>(fill_value), p<T>(got)}, 7 * 6, g);
      expect_close(got, want, 0, "gather_rows fill " + std::to_string(fill) + " " + grid_name(g));
    }
  }
}

TEST(LaunchGridNn, GatherRowsMatchesTheCpuOpWithFillRows) {
  check_gather_rows<float>(kFloat32);
  check_gather_rows<double>(kFloat64);
  check_gather_rows<int64_t>(kInt64);
}

// ---- embedding --------------------------------------------------------------------------------------

template <typename T>
void check_embedding(DType dt) {
  const int64_t num = 9, dim = 5;
  Tensor weight = native::t(native::to(seeded_randn({dim, num}, 2, kFloat64), dt));  // [9, 5], non-contiguous
  Tensor indices = from_vector<int64_t>({3, 0, 8, 3, 3, 5, 0, 2, 8, 3, 7}, {11});
  const int64_t n = indices.numel();
  Tensor want = native::embedding_forward(weight, indices);
  Tensor wc = native::contiguous(weight);
  for (const Grid& g : kGrids) {
    Tensor got = full({n, dim}, 99.0, TensorOptions(dt));
    run_emulated(kernels::GatherRowsF<T>{p<int64_t>(indices), dim, p<T>(wc), nullptr, p<T>(got)}, n * dim, g);
    expect_close(got, want, 0, "embedding forward " + grid_name(g));
  }
  Tensor grad = native::to(seeded_randn({n, dim}, 3, kFloat64), dt);
  for (int64_t pad : {-1, 3, 4}) {
    Tensor want_gw = native::embedding_backward(grad, indices, num, pad, dt, Device::cpu());
    for (const Grid& g : kGrids) {
      // The CUDA path: positions by IotaF, a stable sort of (index, position) (CUB's
      // DeviceRadixSort there), then one item per (sorted position, column).
      Tensor pos_in = empty({n}, TensorOptions(kInt64));
      run_emulated(kernels::IotaF{p<int64_t>(pos_in)}, n, g);
      std::vector<int64_t> pos = pos_in.to_vector<int64_t>();
      const std::vector<int64_t> idx = indices.to_vector<int64_t>();
      std::stable_sort(pos.begin(), pos.end(), [&](int64_t a, int64_t b) { return idx[a] < idx[b]; });
      std::vector<int64_t> keys(pos.size());
      for (size_t i = 0; i < pos.size(); ++i) keys[i] = idx[static_cast<size_t>(pos[i])];
      Tensor gw = zeros({num, dim}, TensorOptions(dt));
      run_emulated(kernels::EmbeddingBackwardSegmentF<T>{keys.data(), pos.data(), n, dim, pad, p<T>(grad), p<T>(gw)},
                   n * dim, g);
      // Bit-equal: the segment sums run in position order, as the CPU kernel does.
      expect_close(gw, want_gw, 0, "embedding backward padding_idx " + std::to_string(pad) + " " + grid_name(g));
    }
  }
}

TEST(LaunchGridNn, EmbeddingForwardAndSortedSegmentBackwardMatchTheCpuOpBitForBit) {
  check_embedding<float>(kFloat32);
  check_embedding<double>(kFloat64);
}

// ---- layer_norm -------------------------------------------------------------------------------------

template <typename T>
void check_layer_norm(DType dt, bool affine) {
  // 130 rows: three blocks of kLayerNormBlockRows, the last one short.
  const int64_t M = 130, N = 7;
  const double tol = dt == kFloat32 ? 1e-6 : 1e-13;
  Tensor x = native::transpose(native::to(seeded_randn({N, M}, 4, kFloat64), dt), 0, 1);  // non-contiguous
  Tensor w = affine ? native::to(seeded_randn({N}, 5, kFloat64), dt) : Tensor();
  Tensor b = affine ? native::to(seeded_randn({N}, 6, kFloat64), dt) : Tensor();
  const std::string what = std::string(affine ? "affine " : "plain ") + (dt == kFloat32 ? "float32 " : "float64 ");
  native::LayerNormForward want = native::layer_norm_forward(x, M, N, w, b, 1e-5);
  Tensor xc = native::contiguous(x);
  Tensor grad = native::to(seeded_randn({M, N}, 7, kFloat64), dt);
  std::vector<Tensor> want_g = native::layer_norm_backward(grad, x, w, want.mean, want.rstd, M, N, {true, true, true});
  for (const Grid& g : kGrids) {
    Tensor y = empty({M, N}, TensorOptions(dt));
    Tensor mean = empty({M}, TensorOptions(kFloat64)), rstd = empty({M}, TensorOptions(kFloat64));
    run_emulated(kernels::LayerNormForwardRowF<T>{p<T>(xc), p<T>(w), p<T>(b), p<T>(y), p<double>(mean),
                                                  p<double>(rstd), N, 1e-5},
                 M, g);
    expect_close(y, want.y, tol, what + "y " + grid_name(g));
    expect_close(mean, want.mean, 1e-14, what + "mean " + grid_name(g));
    expect_close(rstd, want.rstd, 1e-14, what + "rstd " + grid_name(g));
    Tensor gx = empty({M, N}, TensorOptions(dt)), gw = empty({N}, TensorOptions(dt)), gb = empty({N}, TensorOptions(dt));
    run_emulated(kernels::LayerNormBackwardRowF<T>{p<T>(grad), p<T>(xc), p<T>(w), p<double>(mean), p<double>(rstd), N,
                                                   p<T>(gx)},
                 M, g);
    run_emulated(kernels::LayerNormWeightColumnF<T>{p<T>(grad), p<T>(xc), p<double>(mean), p<double>(rstd), M, N,
                                                    p<T>(gw), p<T>(gb)},
                 N, g);
    expect_close(gx, want_g[0], tol, what + "grad input " + grid_name(g));
    expect_close(gw, want_g[1], tol, what + "grad weight " + grid_name(g));
    expect_close(gb, want_g[2], tol, what + "grad bias " + grid_name(g));
  }
}

TEST(LaunchGridNn, LayerNormRowAndColumnFunctorsMatchTheCpuOp) {
  for (bool affine : {true, false}) {
    check_layer_norm<float>(kFloat32, affine);
    check_layer_norm<double>(kFloat64, affine);
  }
}

// ---- the stepwise recurrent layer with emulated cell launches -------------------------------------------

Grid g_cell_grid = kGrids[0];

template <typename T>
void emulated_cell(kernels::RnnMode kind, bool backward, const kernels::CellStep<T>& s, int64_t rows, int) {
  const int64_t n = rows * s.hidden;
  if (backward) {
    run_emulated(kernels::CellBackwardF<T>{s, kind}, n, g_cell_grid);
  } else {
    run_emulated(kernels::CellForwardF<T>{s, kind}, n, g_cell_grid);
  }
}
const native::detail::CellRunner kEmulatedCells{&emulated_cell<float>, &emulated_cell<double>};

void check_stepwise_layer(native::RnnMode mode, int64_t D, bool bias, DType dt, const Grid& grid) {
  using native::RnnMode;
  const int64_t F = 5, H = 3, G = native::gate_count(mode);
  auto steps = native::PackedSteps::make({4, 4, 3, 1});  // sequences end at different steps
  const int64_t N = steps->num_rows, B = 4;
  const bool lstm = mode == RnnMode::kLstm;
  const std::string what = std::string(native::rnn_mode_name(mode)) + " D=" + std::to_string(D) +
                           (bias ? " bias " : " no bias ") + (dt == kFloat32 ? "float32 " : "float64 ") +
                           grid_name(grid);
  // float32: the CPU engine's vectorized exp/tanh approximations (Note [RNN pointwise dispatch]).
  const double tol = dt == kFloat32 ? 2e-5 : 1e-11;
  uint64_t seed = 10;
  auto r = [&](const IntList& sizes) { return native::mul(seeded_randn(sizes, seed++, dt), 0.5); };
  std::vector<Tensor> weights;
  for (int64_t d = 0; d < D; ++d) {
    weights.push_back(r({G * H, F}));
    weights.push_back(r({G * H, H}));
    weights.push_back(bias ? r({G * H}) : Tensor());
    weights.push_back(bias ? r({G * H}) : Tensor());
  }
  Tensor x = native::t(r({F, N}));  // non-contiguous input
  Tensor h0 = r({D, B, H}), c0 = lstm ? r({D, B, H}) : Tensor();
  native::RnnLayerForward want = native::rnn_layer_forward(mode, x, *steps, h0, c0, weights);
  g_cell_grid = grid;
  native::RnnLayerForward got =
      native::detail::rnn_layer_forward_stepwise(mode, x, *steps, h0, c0, weights, kEmulatedCells);
  expect_close(got.output, want.output, tol, what + ": output");
  expect_close(got.h_n, want.h_n, tol, what + ": h_n");
  if (lstm) expect_close(got.c_n, want.c_n, tol, what + ": c_n");
  expect_close(h0, native::contiguous(h0), 0, what + ": h0 untouched");

  Tensor d_out = r({N, D * H}), d_hn = r({D, B, H}), d_cn = lstm ? r({D, B, H}) : Tensor();
  std::vector<Tensor> w_ih, w_hh;
  for (int64_t d = 0; d < D; ++d) {
    w_ih.push_back(weights[static_cast<size_t>(4 * d)]);
    w_hh.push_back(weights[static_cast<size_t>(4 * d + 1)]);
  }
  std::vector<bool> needs(3 + 4 * static_cast<size_t>(D), true);
  if (!lstm) needs[2] = false;
  if (!bias) {
    for (int64_t d = 0; d < D; ++d) needs[5 + 4 * d] = needs[6 + 4 * d] = false;
  }
  const auto want_g =
      native::rnn_layer_backward(mode, *steps, x, w_ih, w_hh, want.saved, d_out, d_hn, d_cn, needs);
  const auto got_g = native::detail::rnn_layer_backward_stepwise(mode, *steps, x, w_ih, w_hh, got.saved, d_out, d_hn,
                                                                 d_cn, needs, kEmulatedCells);
  ASSERT_EQ(got_g.size(), want_g.size()) << what;
  for (size_t i = 0; i < want_g.size(); ++i) {
    ASSERT_EQ(got_g[i].defined(), want_g[i].defined()) << what << ": gradient " << i;
    if (want_g[i].defined()) expect_close(got_g[i], want_g[i], tol, what + ": gradient " + std::to_string(i));
  }
  // Without output gradients (only the final states'): the cells' dy == nullptr branch.
  const auto want_s = native::rnn_layer_backward(mode, *steps, x, w_ih, w_hh, want.saved, Tensor(), d_hn, d_cn, needs);
  const auto got_s = native::detail::rnn_layer_backward_stepwise(mode, *steps, x, w_ih, w_hh, got.saved, Tensor(),
                                                                 d_hn, d_cn, needs, kEmulatedCells);
  for (size_t i = 0; i < want_s.size(); ++i) {
    if (want_s[i].defined()) expect_close(got_s[i], want_s[i], tol, what + ": state-only gradient " + std::to_string(i));
  }
}

TEST(LaunchGridNn, StepwiseRecurrentLayerWithEmulatedCellsMatchesTheCpuEngine) {
  using native::RnnMode;
  for (RnnMode mode : {RnnMode::kLstm, RnnMode::kGru, RnnMode::kRnnTanh, RnnMode::kRnnRelu}) {
    for (int64_t D : {1, 2}) {
      for (bool bias : {true, false}) {
        for (DType dt : {kFloat32, kFloat64}) check_stepwise_layer(mode, D, bias, dt, kGrids[(D + bias) % 4]);
      }
    }
  }
  // Every grid once over the longest cell (LSTM, both directions).
  for (const Grid& g : kGrids) check_stepwise_layer(RnnMode::kLstm, 2, true, kFloat64, g);
}

}  // namespace
}  // namespace ember
