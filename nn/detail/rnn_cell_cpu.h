// Fused CPU pointwise kernels of the recurrent cells (LSTM, GRU, tanh/ReLU RNN), one call per
// time step and row range: gate activations, cell update and the outputs in one pass forward,
// gate gradients and the state gradients in one pass backward. The matrix products around them
// are in nn/detail/rnn_layer.cpp. float32 uses vectorized exp/tanh approximations (about 1.5e-7
// relative error, compiled for AVX2 and AVX-512 with run-time dispatch); float64 uses libm.
// Pure functions over caller-owned buffers; distinct row ranges may run concurrently.
// See Note [RNN step buffers] in rnn_layer.cpp for what each buffer holds.
#pragma once
#include <cstdint>

namespace ember::nn::detail {

/// One step's pointers. Row j of a "packed" buffer (gates, gh, hprev, cprev, tanhc, y and the
/// gradients) is the step's j-th active row; "state" buffers (h, c, dh, dc) are indexed by j too.
template <typename T>
struct CellStep {
  int64_t hidden = 0;      // H
  T* gates = nullptr;      // [rows, G*H]: pre-activations in, activations out (forward)
  T* gh = nullptr;         // GRU: [rows, 3H] W_hh h + b_hh
  T* hprev = nullptr;      // [rows, H] h entering the step (GRU backward)
  T* cprev = nullptr;      // LSTM: [rows, H] c entering the step (written forward)
  T* tanhc = nullptr;      // LSTM: [rows, H] tanh of the new c (written forward)
  T* y = nullptr;          // [rows, ldy]: the step's output rows (this direction's columns)
  int64_t ldy = 0;
  T* h = nullptr;          // state [rows, H]
  T* c = nullptr;          // LSTM state [rows, H]
  // backward
  const T* dy = nullptr;   // [rows, ldy] or null (no gradient for the output)
  T* dh = nullptr;         // state gradient [rows, H]
  T* dc = nullptr;         // LSTM [rows, H]
  T* dgates = nullptr;     // [rows, G*H] gradient w.r.t. the pre-activations (input side for GRU)
  T* dgh = nullptr;        // GRU [rows, 3H] gradient w.r.t. W_hh h + b_hh
};

// Rows [j0, j1) of one step.
void lstm_forward_rows(const CellStep<float>& s, int64_t j0, int64_t j1);
void lstm_forward_rows(const CellStep<double>& s, int64_t j0, int64_t j1);
void lstm_backward_rows(const CellStep<float>& s, int64_t j0, int64_t j1);
void lstm_backward_rows(const CellStep<double>& s, int64_t j0, int64_t j1);
void gru_forward_rows(const CellStep<float>& s, int64_t j0, int64_t j1);
void gru_forward_rows(const CellStep<double>& s, int64_t j0, int64_t j1);
void gru_backward_rows(const CellStep<float>& s, int64_t j0, int64_t j1);
void gru_backward_rows(const CellStep<double>& s, int64_t j0, int64_t j1);
/// relu = false: tanh cell.
void rnn_forward_rows(const CellStep<float>& s, bool relu, int64_t j0, int64_t j1);
void rnn_forward_rows(const CellStep<double>& s, bool relu, int64_t j0, int64_t j1);
void rnn_backward_rows(const CellStep<float>& s, bool relu, int64_t j0, int64_t j1);
void rnn_backward_rows(const CellStep<double>& s, bool relu, int64_t j0, int64_t j1);

}  // namespace ember::nn::detail
