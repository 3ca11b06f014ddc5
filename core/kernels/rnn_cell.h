// The pointwise math of the recurrent cells (LSTM, GRU, tanh/ReLU RNN), once, as host/device
// functions of one hidden unit: the CPU row kernels (core/kernels/cpu/rnn_cell.cpp) call them
// in loops that vectorize, a CUDA kernel calls them per thread (CellForwardF / CellBackwardF
// below, one work item per (row, hidden unit)). `M` supplies sigmoid and tanh
// (the CPU's float32 approximations, libm for float64, the device's own on CUDA). CellStep is
// the plain-data view of one time step's buffers (Note [RNN step buffers] in
// core/kernels/cpu/rnn_layer.cpp says what each holds).
#pragma once
#include <cstdint>

#include "core/kernels/math.h"
#include "core/macros.h"

namespace ember::kernels {

/// One step's pointers. Row j of a "packed" buffer (gates, gh, hprev, cprev, tanhc, y and the
/// gradients) is the step's j-th active row; "state" buffers (h, c, dh, dc) are indexed by j too.
/// Distinct buffers never overlap.
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

// ---- LSTM: gates i, f, g, o --------------------------------------------------------------------

/// Pre-activations in (i, f, g, o), activations out; c updated; t = tanh(c_new); returns h.
template <typename T, typename M>
EMBER_HOST_DEVICE EMBER_FORCE_INLINE T lstm_forward_unit(T& i, T& f, T& g, T& o, T& c, T& t) {
  i = M::sigmoid(i);
  f = M::sigmoid(f);
  g = M::tanh(g);
  o = M::sigmoid(o);
  c = f * c + i * g;
  t = M::tanh(c);
  return o * t;
}

/// From the activations, c entering the step (cp), t = tanh(c), dh and dc (updated to the
/// gradient of c entering the step): the pre-activation gradients di, df, dg, dout.
template <typename T>
EMBER_HOST_DEVICE EMBER_FORCE_INLINE void lstm_backward_unit(T i, T f, T g, T o, T cp, T t, T dh, T& dc, T& di,
                                                            T& df, T& dg, T& dout) {
  const T dck = dc + dh * o * (T(1) - t * t);
  di = dck * g * i * (T(1) - i);
  df = dck * cp * f * (T(1) - f);
  dg = dck * i * (T(1) - g * g);
  dout = dh * t * o * (T(1) - o);
  dc = dck * f;
}

// ---- GRU: gates r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn)) ----------------------------

/// xr, xz, xn: input-side pre-activations in, activations r, z, n out; returns the new h.
template <typename T, typename M>
EMBER_HOST_DEVICE EMBER_FORCE_INLINE T gru_forward_unit(T& xr, T& xz, T& xn, T hr, T hz, T hn, T h) {
  const T r = M::sigmoid(xr + hr);
  const T z = M::sigmoid(xz + hz);
  const T n = M::tanh(xn + r * hn);
  xr = r;
  xz = z;
  xn = n;
  return (T(1) - z) * n + z * h;
}

/// d: dh in, the direct path d * z out (the caller adds dgh @ W_hh). Input-side gradients
/// (dxr, dxz, dxn) and hidden-side ones (dhr, dhz, dhn).
template <typename T>
EMBER_HOST_DEVICE EMBER_FORCE_INLINE void gru_backward_unit(T r, T z, T n, T hn, T hp, T& d, T& dxr, T& dxz, T& dxn,
                                                           T& dhr, T& dhz, T& dhn) {
  const T dn_pre = d * (T(1) - z) * (T(1) - n * n);
  const T dz_pre = d * (hp - n) * z * (T(1) - z);
  const T dr_pre = dn_pre * hn * r * (T(1) - r);
  dxr = dr_pre;
  dxz = dz_pre;
  dxn = dn_pre;
  dhr = dr_pre;
  dhz = dz_pre;
  dhn = dn_pre * r;
  d = d * z;
}

// ---- Elman RNN: h = act(pre) ---------------------------------------------------------------------

template <typename T, typename M>
EMBER_HOST_DEVICE EMBER_FORCE_INLINE T rnn_forward_unit(T pre, bool relu) {
  return relu ? (pre > T(0) ? pre : T(0)) : M::tanh(pre);
}
/// From the activation a and dh: the pre-activation gradient.
template <typename T>
EMBER_HOST_DEVICE EMBER_FORCE_INLINE T rnn_backward_unit(T a, T dh, bool relu) {
  return relu ? (a > T(0) ? dh : T(0)) : dh * (T(1) - a * a);
}

// ---- per-element functors of one time step (the GPU path) ------------------------------------------

/// The cell of a recurrent layer: the one enum of the RNN stack (native::RnnMode is this type).
enum class RnnMode : int8_t { kRnnTanh, kRnnRelu, kLstm, kGru };

/// sigmoid and tanh in T from the device's (or libm's) exp and tanh.
struct CellMath {
  template <typename T>
  EMBER_HOST_DEVICE static T sigmoid(T x) { return T(1) / (T(1) + k_exp(-x)); }
  template <typename T>
  EMBER_HOST_DEVICE static T tanh(T x) { return k_tanh(x); }
};

/// Forward of one step over rows * H items (row j = e / H, unit k = e % H), writing what the
/// CPU row kernels write (Note [RNN step buffers] in core/kernels/cpu/rnn_layer.cpp): the
/// activated gates in place, LSTM's c entering the step and tanh of the new c, the new state
/// h (and c) and the output row.
template <typename T, typename M = CellMath>
struct CellForwardF {
  CellStep<T> s;
  RnnMode kind;
  EMBER_HOST_DEVICE void operator()(int64_t e) const {
    const int64_t H = s.hidden, j = e / H, k = e - j * H, u = j * H + k;
    T h_new;
    switch (kind) {
      case RnnMode::kLstm: {
        T* g = s.gates + j * 4 * H + k;
        T i = g[0], f = g[H], gg = g[2 * H], o = g[3 * H], c = s.c[u], t;
        s.cprev[u] = c;
        h_new = lstm_forward_unit<T, M>(i, f, gg, o, c, t);
        g[0] = i;
        g[H] = f;
        g[2 * H] = gg;
        g[3 * H] = o;
        s.tanhc[u] = t;
        s.c[u] = c;
        break;
      }
      case RnnMode::kGru: {
        T* g = s.gates + j * 3 * H + k;
        const T* gh = s.gh + j * 3 * H + k;
        T r = g[0], z = g[H], n = g[2 * H];
        h_new = gru_forward_unit<T, M>(r, z, n, gh[0], gh[H], gh[2 * H], s.h[u]);
        g[0] = r;
        g[H] = z;
        g[2 * H] = n;
        break;
      }
      default: {
        T* g = s.gates + u;
        h_new = rnn_forward_unit<T, M>(*g, kind == RnnMode::kRnnRelu);
        *g = h_new;
        break;
      }
    }
    s.h[u] = h_new;
    s.y[j * s.ldy + k] = h_new;
  }
};

/// Backward of one step over rows * H items: dh (+ dy) and, for LSTM, dc to the pre-activation
/// gradients; dh ends as the GRU's direct path d * z (the caller's GEMM adds dgh W_hh; for LSTM
/// and RNN the GEMM overwrites dh), dc as the gradient of c entering the step.
template <typename T>
struct CellBackwardF {
  CellStep<T> s;
  RnnMode kind;
  EMBER_HOST_DEVICE void operator()(int64_t e) const {
    const int64_t H = s.hidden, j = e / H, k = e - j * H, u = j * H + k;
    T d = s.dh[u];
    if (s.dy != nullptr) d += s.dy[j * s.ldy + k];
    switch (kind) {
      case RnnMode::kLstm: {
        const T* g = s.gates + j * 4 * H + k;
        T* dg = s.dgates + j * 4 * H + k;
        T dc = s.dc[u];
        lstm_backward_unit<T>(g[0], g[H], g[2 * H], g[3 * H], s.cprev[u], s.tanhc[u], d, dc, dg[0], dg[H], dg[2 * H],
                              dg[3 * H]);
        s.dc[u] = dc;
        break;
      }
      case RnnMode::kGru: {
        const T* g = s.gates + j * 3 * H + k;
        T* dg = s.dgates + j * 3 * H + k;
        T* dgh = s.dgh + j * 3 * H + k;
        gru_backward_unit<T>(g[0], g[H], g[2 * H], s.gh[j * 3 * H + 2 * H + k], s.hprev[u], d, dg[0], dg[H], dg[2 * H],
                             dgh[0], dgh[H], dgh[2 * H]);
        break;
      }
      default:
        s.dgates[u] = rnn_backward_unit<T>(s.gates[u], d, kind == RnnMode::kRnnRelu);
        break;
    }
    s.dh[u] = d;
  }
};

}  // namespace ember::kernels
