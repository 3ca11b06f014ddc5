// The stepwise recurrent layer (core/ops/detail/rnn_stepwise.h): Note [RNN step buffers] in
// core/kernels/cpu/rnn_layer.cpp written with native ops, so that it runs on any device whose
// GEMM, copy and reduction ops exist, plus one cell launch per step.
#include "core/ops/detail/rnn_stepwise.h"

#include <type_traits>

#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember::native::detail {
namespace {

template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

template <typename T>
void run_cell(const CellRunner& cells, RnnMode mode, bool backward, const kernels::CellStep<T>& s, int64_t rows,
              int device_index) {
  if constexpr (std::is_same_v<T, float>) {
    cells.f32(mode, backward, s, rows, device_index);
  } else {
    cells.f64(mode, backward, s, rows, device_index);
  }
}

// Rows [off, off + b) of a [N, cols] buffer.
Tensor rows_of(const Tensor& t, int64_t off, int64_t b) { return narrow(t, 0, off, b); }

Tensor column_sum(const Tensor& m) { return sum(m, {0}); }

struct Shape {
  RnnMode mode;
  int64_t D, G, H, N, B;
  bool bias;
};

template <typename T>
void forward_direction(const Shape& s, const PackedSteps& steps, int64_t d, const Tensor& x, const Tensor& w_ih,
                       const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, Tensor& y, Tensor& h, Tensor& c,
                       RnnDirectionSaved& sv, const CellRunner& cells) {
  const int64_t H = s.H, GH = s.G * s.H, N = s.N;
  const bool gru = s.mode == RnnMode::kGru, lstm = s.mode == RnnMode::kLstm, reverse = d == 1;
  const TensorOptions opts = TensorOptions(x.dtype()).device(x.device());
  const int dev = x.device().index;
  sv.gates = empty({N, GH}, opts);
  sv.hprev = empty({N, H}, opts);
  if (lstm) {
    sv.cprev = empty({N, H}, opts);
    sv.tanhc = empty({N, H}, opts);
  }
  if (gru) sv.gh = empty({N, GH}, opts);
  // Input projection of every step at once, plus the biases (GRU keeps b_hh for gh).
  if (s.bias) copy_(sv.gates, expand(gru ? b_ih : add(b_ih, b_hh), {N, GH}));
  addmm_out(sv.gates, x, t(w_ih), s.bias ? 1.0 : 0.0, 1.0);
  const Tensor w_hh_t = t(w_hh);
  const int64_t T_steps = static_cast<int64_t>(steps.batch_sizes.size());
  for (int64_t i = 0; i < T_steps; ++i) {
    const int64_t st = reverse ? T_steps - 1 - i : i;
    const int64_t b = steps.batch_sizes[static_cast<size_t>(st)];
    const int64_t off = steps.offsets[static_cast<size_t>(st)];
    const Tensor h_active = narrow(h, 0, 0, b);
    Tensor hprev = rows_of(sv.hprev, off, b);
    copy_(hprev, h_active);
    if (gru) {
      Tensor gh = rows_of(sv.gh, off, b);
      if (s.bias) copy_(gh, expand(b_hh, {b, GH}));
      addmm_out(gh, h_active, w_hh_t, s.bias ? 1.0 : 0.0, 1.0);
    } else {
      Tensor g = rows_of(sv.gates, off, b);
      addmm_out(g, h_active, w_hh_t, 1.0, 1.0);
    }
    run_cell<T>(cells, s.mode, /*backward=*/false, forward_cell_step<T>(sv, off, d, s.D, H, y, ptr<T>(h), ptr<T>(c)),
                b, dev);
  }
}

template <typename T>
std::vector<Tensor> backward_all(const Shape& s, const PackedSteps& steps, const Tensor& x,
                                 const std::vector<Tensor>& w_ihs, const std::vector<Tensor>& w_hhs,
                                 const std::vector<RnnDirectionSaved>& saved, const Tensor& dy_in, const Tensor& dhn,
                                 const Tensor& dcn, const std::vector<bool>& needs, const CellRunner& cells) {
  const int64_t H = s.H, GH = s.G * s.H, N = s.N, B = s.B, D = s.D;
  const TensorOptions opts = TensorOptions(x.dtype()).device(x.device());
  const int dev = x.device().index;
  const bool lstm = s.mode == RnnMode::kLstm, gru = s.mode == RnnMode::kGru;
  const Tensor dy = dy_in.defined() ? contiguous(dy_in) : Tensor();
  Tensor dh0 = dhn.defined() ? clone(contiguous(dhn)) : zeros({D, B, H}, opts);
  Tensor dc0;
  if (lstm) dc0 = dcn.defined() ? clone(contiguous(dcn)) : zeros({D, B, H}, opts);
  std::vector<Tensor> out(3 + 4 * static_cast<size_t>(D));
  Tensor dx;
  const int64_t T_steps = static_cast<int64_t>(steps.batch_sizes.size());
  for (int64_t d = 0; d < D; ++d) {
    const RnnDirectionSaved& sv = saved[static_cast<size_t>(d)];
    const Tensor& w_ih = w_ihs[static_cast<size_t>(d)];
    const Tensor& w_hh = w_hhs[static_cast<size_t>(d)];
    const bool reverse = d == 1;
    Tensor dg = empty({N, GH}, opts);
    Tensor dgh = gru ? empty({N, GH}, opts) : dg;
    Tensor dh = select(dh0, 0, d);
    Tensor dc = lstm ? select(dc0, 0, d) : Tensor();
    for (int64_t i = T_steps - 1; i >= 0; --i) {
      const int64_t st = reverse ? T_steps - 1 - i : i;
      const int64_t b = steps.batch_sizes[static_cast<size_t>(st)];
      const int64_t off = steps.offsets[static_cast<size_t>(st)];
      run_cell<T>(cells, s.mode, /*backward=*/true,
                  backward_cell_step<T>(sv, off, d, D, H, dy, dh, dc, dg, gru ? dgh : Tensor()), b, dev);
      // dh_prev = dG_hh W_hh: overwrites the active rows (GRU adds to its direct path d * z).
      Tensor dh_active = narrow(dh, 0, 0, b);
      addmm_out(dh_active, rows_of(dgh, off, b), w_hh, gru ? 1.0 : 0.0, 1.0);
    }
    rnn_direction_gradients(s.mode, dg, dgh, x, sv.hprev, w_ih, needs, 3 + 4 * static_cast<size_t>(d),
                            &column_sum, out, dx);
  }
  out[0] = dx;
  if (needs[1]) out[1] = dh0;
  if (needs[2]) out[2] = dc0;
  return out;
}

Shape shape_of(RnnMode mode, const PackedSteps& steps, const Tensor& w_hh, size_t D, bool bias) {
  return Shape{mode, static_cast<int64_t>(D), gate_count(mode), w_hh.size(1), steps.num_rows,
               steps.batch_sizes[0], bias};
}

}  // namespace

void rnn_direction_gradients(RnnMode mode, const Tensor& dg, const Tensor& dgh, const Tensor& x, const Tensor& hprev,
                             const Tensor& w_ih, const std::vector<bool>& needs, size_t base,
                             Tensor (*column_sum)(const Tensor&), std::vector<Tensor>& out, Tensor& dx) {
  if (needs[base + 0]) out[base + 0] = mm(t(dg), x);
  if (needs[base + 1]) out[base + 1] = mm(t(dgh), hprev);
  if (needs[base + 2]) out[base + 2] = column_sum(dg);
  if (needs[base + 3]) {
    // LSTM and plain RNNs add both biases to the same gates: one sum, two gradients.
    out[base + 3] = mode == RnnMode::kGru ? column_sum(dgh)
                                          : (out[base + 2].defined() ? clone(out[base + 2]) : column_sum(dgh));
  }
  if (needs[0]) {
    if (!dx.defined()) {
      dx = mm(dg, w_ih);
    } else {
      addmm_out(dx, dg, w_ih, 1.0, 1.0);
    }
  }
}

RnnLayerForward rnn_layer_forward_stepwise(RnnMode mode, const Tensor& input, const PackedSteps& steps,
                                           const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
                                           const CellRunner& cells) {
  const Shape s = shape_of(mode, steps, weights[1], weights.size() / 4, weights[2].defined());
  RnnLayerForward out;
  const Tensor x = contiguous(input);
  out.output = empty({steps.num_rows, s.D * s.H}, TensorOptions(input.dtype()).device(input.device()));
  out.h_n = clone(contiguous(h0));
  if (mode == RnnMode::kLstm) out.c_n = clone(contiguous(c0));
  out.saved.assign(static_cast<size_t>(s.D), RnnDirectionSaved{});
  for (int64_t d = 0; d < s.D; ++d) {
    const size_t w = 4 * static_cast<size_t>(d);
    Tensor h = select(out.h_n, 0, d);
    Tensor c = out.c_n.defined() ? select(out.c_n, 0, d) : Tensor();
    if (x.dtype() == kFloat64) {
      forward_direction<double>(s, steps, d, x, weights[w], weights[w + 1], weights[w + 2], weights[w + 3],
                                out.output, h, c, out.saved[static_cast<size_t>(d)], cells);
    } else {
      forward_direction<float>(s, steps, d, x, weights[w], weights[w + 1], weights[w + 2], weights[w + 3],
                               out.output, h, c, out.saved[static_cast<size_t>(d)], cells);
    }
  }
  return out;
}

std::vector<Tensor> rnn_layer_backward_stepwise(RnnMode mode, const PackedSteps& steps, const Tensor& input,
                                                const std::vector<Tensor>& w_ih, const std::vector<Tensor>& w_hh,
                                                const std::vector<RnnDirectionSaved>& saved, const Tensor& d_output,
                                                const Tensor& d_h_n, const Tensor& d_c_n,
                                                const std::vector<bool>& needs, const CellRunner& cells) {
  const Shape s = shape_of(mode, steps, w_hh[0], w_ih.size(), false);
  const Tensor x = contiguous(input);
  if (x.dtype() == kFloat64) {
    return backward_all<double>(s, steps, x, w_ih, w_hh, saved, d_output, d_h_n, d_c_n, needs, cells);
  }
  return backward_all<float>(s, steps, x, w_ih, w_hh, saved, d_output, d_h_n, d_c_n, needs, cells);
}

}  // namespace ember::native::detail
