// The device-neutral engine of one recurrent layer over packed rows (both directions when
// bidirectional): GEMMs and state copies through native ops (cuBLAS on CUDA), and per time step
// one pointwise cell launch (core/kernels/rnn_cell.h: CellForwardF / CellBackwardF) through a
// CellRunner. native::rnn_layer_forward / _backward run it for CUDA tensors with the CUDA
// launchers; the CPU tests run it on CPU tensors with the CPU emulation of the launch grid, so
// the whole GPU path of the layer is checked against the CPU engine without a GPU. It follows
// Note [RNN step buffers] (core/kernels/cpu/rnn_layer.cpp) step for step and fills the same
// RnnDirectionSaved. Thread-safe (no state of its own).
#pragma once
#include <vector>

#include "core/kernels/rnn_cell.h"
#include "core/ops/nn_native.h"

namespace ember::native::detail {

/// Launches one step's cell over `rows` rows of s (pointers into the layer's buffers) on
/// device_index's current stream (or runs it, for a CPU emulation).
struct CellRunner {
  void (*f32)(kernels::RnnMode kind, bool backward, const kernels::CellStep<float>& s, int64_t rows,
              int device_index);
  void (*f64)(kernels::RnnMode kind, bool backward, const kernels::CellStep<double>& s, int64_t rows,
              int device_index);
};

/// As native::rnn_layer_forward, arguments already checked by it; h_n, c_n are fresh copies of
/// h0, c0 that the steps update in place.
RnnLayerForward rnn_layer_forward_stepwise(RnnMode mode, const Tensor& input, const PackedSteps& steps,
                                           const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
                                           const CellRunner& cells);

/// As native::rnn_layer_backward.
std::vector<Tensor> rnn_layer_backward_stepwise(RnnMode mode, const PackedSteps& steps, const Tensor& input,
                                                const std::vector<Tensor>& w_ih, const std::vector<Tensor>& w_hh,
                                                const std::vector<RnnDirectionSaved>& saved, const Tensor& d_output,
                                                const Tensor& d_h_n, const Tensor& d_c_n,
                                                const std::vector<bool>& needs, const CellRunner& cells);

/// Row `row` of a contiguous [N, cols] buffer as T* (null for an undefined buffer).
template <typename T>
T* row_ptr(const Tensor& t, int64_t row, int64_t cols) {
  return t.defined() ? static_cast<T*>(t.raw_data()) + row * cols : nullptr;
}

/// The CellStep fields a step's forward and backward share: H, the saved buffers of sv at the
/// step's rows starting at `off` (those undefined for the mode stay null), and ldy = D*H.
template <typename T>
kernels::CellStep<T> saved_cell_step(const RnnDirectionSaved& sv, int64_t off, int64_t D, int64_t H) {
  const int64_t GH = sv.gates.size(1);
  kernels::CellStep<T> cs;
  cs.hidden = H;
  cs.gates = row_ptr<T>(sv.gates, off, GH);
  cs.gh = row_ptr<T>(sv.gh, off, GH);
  cs.hprev = row_ptr<T>(sv.hprev, off, H);
  cs.cprev = row_ptr<T>(sv.cprev, off, H);
  cs.tanhc = row_ptr<T>(sv.tanhc, off, H);
  cs.ldy = D * H;
  return cs;
}

/// The forward CellStep of the step whose rows start at `off`, for direction d of D: the saved
/// buffers of sv, this direction's columns of y [N, D*H], the states h and c (c null but for LSTM).
template <typename T>
kernels::CellStep<T> forward_cell_step(const RnnDirectionSaved& sv, int64_t off, int64_t d, int64_t D, int64_t H,
                                       const Tensor& y, T* h, T* c) {
  kernels::CellStep<T> cs = saved_cell_step<T>(sv, off, D, H);
  cs.y = row_ptr<T>(y, off, D * H) + d * H;
  cs.h = h;
  cs.c = c;
  return cs;
}

/// The backward CellStep of the same step: dy [N, D*H] (undefined: none), the state gradients
/// dh, dc [B, H] (dc undefined but for LSTM), the pre-activation gradients dg and, for GRU
/// only (else undefined), dgh, all [N, G*H].
template <typename T>
kernels::CellStep<T> backward_cell_step(const RnnDirectionSaved& sv, int64_t off, int64_t d, int64_t D, int64_t H,
                                        const Tensor& dy, const Tensor& dh, const Tensor& dc, const Tensor& dg,
                                        const Tensor& dgh) {
  kernels::CellStep<T> cs = saved_cell_step<T>(sv, off, D, H);
  const int64_t GH = sv.gates.size(1);
  cs.dy = dy.defined() ? row_ptr<T>(dy, off, D * H) + d * H : nullptr;
  cs.dh = row_ptr<T>(dh, 0, H);
  cs.dc = row_ptr<T>(dc, 0, H);
  cs.dgates = row_ptr<T>(dg, off, GH);
  cs.dgh = row_ptr<T>(dgh, off, GH);
  return cs;
}

/// The end of one direction's backward, shared by both engines (Note [RNN step buffers]): from
/// the pre-activation gradients of all rows, dg [N, G*H] (and GRU's hidden side dgh; else dgh
/// is dg), the gradients of w_ih, w_hh, b_ih, b_hh into out[base .. base + 3] where needs[] asks,
/// and dx += dg w_ih when needs[0] (dx undefined: assigned). column_sum sums a matrix's columns.
void rnn_direction_gradients(RnnMode mode, const Tensor& dg, const Tensor& dgh, const Tensor& x, const Tensor& hprev,
                             const Tensor& w_ih, const std::vector<bool>& needs, size_t base,
                             Tensor (*column_sum)(const Tensor&), std::vector<Tensor>& out, Tensor& dx);

}  // namespace ember::native::detail
