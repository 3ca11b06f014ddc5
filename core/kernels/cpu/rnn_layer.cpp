#include "core/kernels/cpu/rnn_layer.h"

#include <cstring>
#include <optional>
#include <string>
#include <type_traits>

#include "core/kernels/cpu/packed_gemm.h"
#include "core/kernels/cpu/rnn_cell.h"
#include "core/ops/detail/rnn_stepwise.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/thread_pool.h"

// Note [RNN step buffers]
// The layer works on packed rows: step t owns rows [offsets[t], offsets[t] + batch_sizes[t]),
// its j-th row belonging to the j-th longest sequence. Per direction:
//  - forward: gates = X W_ih^T + bias for ALL rows in one GEMM; then per step (t ascending, or
//    descending for the reverse direction) one GEMM over the active rows adds h W_hh^T
//    (GRU: into a separate gh buffer, since r multiplies only W_hn h + b_hn), and one fused
//    pointwise pass applies the gates, updates c and h, and writes the output rows.
//  - the recurrent state lives in h_n/c_n themselves ([B, H] per direction, row j = sorted
//    sequence j). A step touches rows j < batch_sizes[t] only, so a sequence that ended keeps
//    its last state (forward direction), and a sequence that has not started yet still holds
//    h0 (reverse direction). After the last step the buffers are exactly h_n and c_n.
//  - saved for backward: activated gates, h entering each step (hprev, copied before the step),
//    and for LSTM c entering the step and tanh(c) after it; GRU also keeps gh.
//  - backward walks the steps in the opposite order with dh/dc state buffers initialised to
//    dh_n/dc_n: the fused pointwise pass turns (dy + dh, dc) into the pre-activation gradients
//    dG and dc_prev, and one GEMM over the active rows gives dh_prev = dG W_hh. The same
//    row-range argument makes the buffers end as dh0/dc0. Then the weight gradients are a few
//    large GEMMs over all rows at once: dW_ih = dG^T X, dW_hh = dG^T Hprev, dX = dG W_ih, and
//    the bias gradients are column sums of dG.

namespace ember::kernels::cpu {

using native::PackedSteps;
using native::RnnMode;

namespace {

constexpr int64_t kPointwiseGrain = 65536;  // gate elements per parallel chunk (a step of B=64, H=256 LSTM stays on one thread)

struct LayerShape {
  RnnMode mode;
  int64_t D, G, H, F, B, N;
  bool bias;
};

template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// dst[r, :] = a + b (b may be null) for r in [0, rows).
template <typename T>
void fill_rows(Tensor& dst, const Tensor& a, const Tensor& b) {
  const int64_t rows = dst.size(0), cols = dst.size(1), ld = dst.stride(0);
  Tensor ac = native::contiguous(a);
  std::vector<T> row(ac.data_ptr<T>(), ac.data_ptr<T>() + cols);
  if (b.defined()) {
    Tensor bc = native::contiguous(b);
    const T* pb = bc.data_ptr<T>();
    for (int64_t k = 0; k < cols; ++k) row[static_cast<size_t>(k)] += pb[k];
  }
  T* p = dst.data_ptr<T>();
  for (int64_t r = 0; r < rows; ++r) std::memcpy(p + r * ld, row.data(), static_cast<size_t>(cols) * sizeof(T));
}

// Column sums of a contiguous [rows, cols] matrix, accumulated in double.
template <typename T>
Tensor column_sum(const Tensor& m) {
  const int64_t rows = m.size(0), cols = m.size(1);
  std::vector<double> acc(static_cast<size_t>(cols), 0.0);
  const T* p = m.data_ptr<T>();
  double* a = acc.data();
  for (int64_t r = 0; r < rows; ++r) {
    const T* __restrict row = p + r * cols;
    for (int64_t k = 0; k < cols; ++k) a[k] += static_cast<double>(row[k]);
  }
  Tensor out = empty({cols}, TensorOptions(m.dtype()).device(m.device()));
  T* o = out.data_ptr<T>();
  for (int64_t k = 0; k < cols; ++k) o[k] = static_cast<T>(acc[static_cast<size_t>(k)]);
  return out;
}

// Whether the per-step recurrent products of a layer use PackedRhs: float32, a CPU that runs
// it, a contiguous W_hh, and enough steps to repay packing it.
template <typename T>
bool packed_recurrent_gemm(const Tensor& w_hh, int64_t steps) {
  return std::is_same_v<T, float> && steps >= 4 && w_hh.is_contiguous() && PackedRhs::available();
}

template <typename F>
void for_rows(int64_t rows, int64_t row_elems, const F& f) {
  const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(row_elems, 1));
  if (rows <= grain) {
    f(0, rows);
  } else {
    parallel_for(0, rows, grain, [&](int64_t b, int64_t e) { f(b, e); });
  }
}

// One step's cell (forward or backward) over its `rows` active rows of row_elems gate elements,
// in parallel chunks of rows: the CPU counterpart of the CUDA cell launch.
template <typename T>
void run_cell(RnnMode mode, bool backward, const CellStep<T>& cs, int64_t rows, int64_t row_elems) {
  const bool relu = mode == RnnMode::kRnnRelu;
  for_rows(rows, row_elems, [&](int64_t j0, int64_t j1) {
    switch (mode) {
      case RnnMode::kLstm: backward ? lstm_backward_rows(cs, j0, j1) : lstm_forward_rows(cs, j0, j1); break;
      case RnnMode::kGru: backward ? gru_backward_rows(cs, j0, j1) : gru_forward_rows(cs, j0, j1); break;
      case RnnMode::kRnnTanh:
      case RnnMode::kRnnRelu:
        backward ? rnn_backward_rows(cs, relu, j0, j1) : rnn_forward_rows(cs, relu, j0, j1);
        break;
    }
  });
}

template <typename T>
void forward_direction(const LayerShape& s, const PackedSteps& steps, int64_t d, const Tensor& x, const Tensor& w_ih,
                       const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, Tensor& y, Tensor& h, Tensor& c,
                       native::RnnDirectionSaved& sv) {
  const int64_t H = s.H, GH = s.G * s.H, N = s.N;
  const bool reverse = d == 1;
  const TensorOptions opts = TensorOptions(x.dtype()).device(x.device());
  sv.gates = empty({N, GH}, opts);
  sv.hprev = empty({N, H}, opts);
  if (s.mode == RnnMode::kLstm) {
    sv.cprev = empty({N, H}, opts);
    sv.tanhc = empty({N, H}, opts);
  }
  if (s.mode == RnnMode::kGru) sv.gh = empty({N, GH}, opts);
  // Input projection of every step at once (plus both biases, except GRU's b_hh).
  if (s.bias) fill_rows<T>(sv.gates, b_ih, s.mode == RnnMode::kGru ? Tensor() : b_hh);
  native::addmm_out(sv.gates, x, native::t(w_ih), s.bias ? 1.0 : 0.0, 1.0);
  const int64_t T_steps = static_cast<int64_t>(steps.batch_sizes.size());
  // The recurrent product h [b, H] x W_hh^T runs once per step with a small b (the batch, and
  // fewer rows as packed sequences end). OpenBLAS is markedly slower there with a transposed
  // operand (seen: b = 32: 84 against 104 GFLOPS; b = 64: 113 against 129; b = 128: 132 against
  // 139), so W_hh^T is laid out once per call when the steps outnumber that one copy's cost.
  // float32 on AVX-512: W_hh^T packed once for our own kernel instead (Note [Packed recurrent
  // GEMM] in packed_gemm.cpp), which also skips BLAS's per-call re-packing of W_hh.
  std::optional<PackedRhs> packed;
  Tensor w_hh_t;
  if (packed_recurrent_gemm<T>(w_hh, T_steps)) {
    packed.emplace(w_hh.data_ptr<float>(), H, GH, /*row_stride=*/1, /*col_stride=*/H);
  } else {
    w_hh_t = T_steps >= 4 ? native::contiguous(native::t(w_hh)) : native::t(w_hh);
  }
  T* hp = ptr<T>(h);
  T* cp = ptr<T>(c);
  for (int64_t i = 0; i < T_steps; ++i) {
    const int64_t t = reverse ? T_steps - 1 - i : i;
    const int64_t b = steps.batch_sizes[static_cast<size_t>(t)];
    const int64_t off = steps.offsets[static_cast<size_t>(t)];
    std::memcpy(ptr<T>(sv.hprev) + off * H, hp, static_cast<size_t>(b * H) * sizeof(T));
    if (s.mode == RnnMode::kGru) {
      Tensor gh = native::narrow(sv.gh, 0, off, b);
      if (s.bias) fill_rows<T>(gh, b_hh, Tensor());
      if (packed) {
        packed->multiply(b, reinterpret_cast<const float*>(hp), H, reinterpret_cast<float*>(ptr<T>(sv.gh) + off * GH), GH,
                         /*accumulate=*/s.bias);
      } else {
        native::addmm_out(gh, native::narrow(h, 0, 0, b), w_hh_t, s.bias ? 1.0 : 0.0, 1.0);
      }
    } else {
      if (packed) {
        packed->multiply(b, reinterpret_cast<const float*>(hp), H, reinterpret_cast<float*>(ptr<T>(sv.gates) + off * GH),
                         GH, /*accumulate=*/true);
      } else {
        Tensor g = native::narrow(sv.gates, 0, off, b);
        native::addmm_out(g, native::narrow(h, 0, 0, b), w_hh_t, 1.0, 1.0);
      }
    }
    run_cell<T>(s.mode, /*backward=*/false, native::detail::forward_cell_step<T>(sv, off, d, s.D, H, y, hp, cp), b, GH);
  }
}

template <typename T>
void forward_all(const LayerShape& s, const PackedSteps& steps, const Tensor& x, const std::vector<Tensor>& weights,
                 Tensor& y, Tensor& h_n, Tensor& c_n, std::vector<native::RnnDirectionSaved>& saved) {
  for (int64_t d = 0; d < s.D; ++d) {
    const size_t w = 4 * static_cast<size_t>(d);
    Tensor h = native::select(h_n, 0, d);
    Tensor c = c_n.defined() ? native::select(c_n, 0, d) : Tensor();
    forward_direction<T>(s, steps, d, x, native::contiguous(weights[w]), native::contiguous(weights[w + 1]),
                         weights[w + 2], weights[w + 3], y, h, c, saved[static_cast<size_t>(d)]);
  }
}

template <typename T>
std::vector<Tensor> backward_all(const LayerShape& s, const PackedSteps& steps, const Tensor& x,
                               const std::vector<Tensor>& w_ihs, const std::vector<Tensor>& w_hhs,
                               const std::vector<native::RnnDirectionSaved>& saved, const Tensor& dy_in,
                               const Tensor& dhn, const Tensor& dcn, const std::vector<bool>& needs) {
  const int64_t H = s.H, GH = s.G * s.H, N = s.N, B = s.B, D = s.D;
  const TensorOptions opts = TensorOptions(x.dtype()).device(x.device());
  Tensor dy = dy_in.defined() ? native::contiguous(dy_in) : Tensor();
  const bool lstm = s.mode == RnnMode::kLstm, gru = s.mode == RnnMode::kGru;
  Tensor dh0 = dhn.defined() ? native::clone(native::contiguous(dhn)) : zeros({D, B, H}, opts);
  Tensor dc0;
  if (lstm) dc0 = dcn.defined() ? native::clone(native::contiguous(dcn)) : zeros({D, B, H}, opts);
  std::vector<Tensor> out(3 + 4 * static_cast<size_t>(D));
  Tensor dx;
  const int64_t T_steps = static_cast<int64_t>(steps.batch_sizes.size());
  for (int64_t d = 0; d < D; ++d) {
    const native::RnnDirectionSaved& sv = saved[static_cast<size_t>(d)];
    const Tensor w_ih = w_ihs[static_cast<size_t>(d)];
    const Tensor w_hh = w_hhs[static_cast<size_t>(d)];
    const bool reverse = d == 1;
    Tensor dg = empty({N, GH}, opts);
    Tensor dgh = gru ? empty({N, GH}, opts) : dg;
    Tensor dh = native::select(dh0, 0, d);
    Tensor dc = lstm ? native::select(dc0, 0, d) : Tensor();
    std::optional<PackedRhs> packed;  // W_hh [GH x H] for dh_prev = dG W_hh, as in forward
    if (packed_recurrent_gemm<T>(w_hh, T_steps)) packed.emplace(w_hh.data_ptr<float>(), GH, H, H, 1);
    for (int64_t i = T_steps - 1; i >= 0; --i) {
      const int64_t t = reverse ? T_steps - 1 - i : i;
      const int64_t b = steps.batch_sizes[static_cast<size_t>(t)];
      const int64_t off = steps.offsets[static_cast<size_t>(t)];
      run_cell<T>(s.mode, /*backward=*/true,
                  native::detail::backward_cell_step<T>(sv, off, d, D, H, dy, dh, dc, dg, gru ? dgh : Tensor()), b, GH);
      if (packed) {
        packed->multiply(b, reinterpret_cast<const float*>(ptr<T>(dgh) + off * GH), GH,
                         reinterpret_cast<float*>(ptr<T>(dh)), H, /*accumulate=*/gru);
      } else {
        Tensor dh_active = native::narrow(dh, 0, 0, b);
        native::addmm_out(dh_active, native::narrow(dgh, 0, off, b), w_hh, gru ? 1.0 : 0.0, 1.0);
      }
    }
    native::detail::rnn_direction_gradients(s.mode, dg, dgh, x, sv.hprev, w_ih, needs,
                                            3 + 4 * static_cast<size_t>(d), &column_sum<T>, out, dx);
  }
  out[0] = dx;
  if (needs[1]) out[1] = dh0;
  if (needs[2]) out[2] = dc0;
  return out;
}


LayerShape shape_of(RnnMode mode, const PackedSteps& steps, const Tensor& input, const Tensor& w_hh, size_t D,
                    bool bias) {
  LayerShape s;
  s.mode = mode;
  s.D = static_cast<int64_t>(D);
  s.G = native::gate_count(mode);
  s.H = w_hh.size(1);
  s.F = input.size(1);
  s.B = steps.batch_sizes[0];
  s.N = steps.num_rows;
  s.bias = bias;
  return s;
}

}  // namespace

native::RnnLayerForward rnn_layer_forward(RnnMode mode, const Tensor& input, const PackedSteps& steps,
                                          const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights) {
  native::RnnLayerForward out;
  const Tensor x = native::contiguous(input);
  const int64_t D = static_cast<int64_t>(weights.size() / 4), H = weights[1].size(1);
  out.output = empty({steps.num_rows, D * H}, TensorOptions(input.dtype()).device(input.device()));
  out.h_n = native::clone(native::contiguous(h0));
  if (mode == RnnMode::kLstm) out.c_n = native::clone(native::contiguous(c0));
  const LayerShape s = shape_of(mode, steps, x, weights[1], weights.size() / 4, weights[2].defined());
  out.saved.assign(static_cast<size_t>(s.D), native::RnnDirectionSaved{});
  if (x.dtype() == kFloat64) {
    forward_all<double>(s, steps, x, weights, out.output, out.h_n, out.c_n, out.saved);
  } else {
    forward_all<float>(s, steps, x, weights, out.output, out.h_n, out.c_n, out.saved);
  }
  return out;
}

std::vector<Tensor> rnn_layer_backward(RnnMode mode, const PackedSteps& steps, const Tensor& input,
                                       const std::vector<Tensor>& w_ih, const std::vector<Tensor>& w_hh,
                                       const std::vector<native::RnnDirectionSaved>& saved, const Tensor& dy,
                                       const Tensor& dh_n, const Tensor& dc_n, const std::vector<bool>& needs) {
  const Tensor x = native::contiguous(input);
  const LayerShape s = shape_of(mode, steps, x, w_hh[0], w_ih.size(), false);
  if (x.dtype() == kFloat64) return backward_all<double>(s, steps, x, w_ih, w_hh, saved, dy, dh_n, dc_n, needs);
  return backward_all<float>(s, steps, x, w_ih, w_hh, saved, dy, dh_n, dc_n, needs);
}

}  // namespace ember::kernels::cpu
