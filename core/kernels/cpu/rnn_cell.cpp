#include "core/kernels/cpu/rnn_cell.h"

#include <cmath>

#include "core/kernels/cpu/isa.h"
#include "core/kernels/cpu/vec_math.h"

// Note [RNN pointwise dispatch]
// The float32 row kernels are compiled for baseline x86-64, AVX2+FMA and AVX-512 (isa.h) and
// dispatched per call. Their exp/tanh are the polynomial approximations of vec_math.h, written
// so the loop over the hidden units vectorizes: libm's scalar expf/tanhf would dominate a step
// (five transcendentals per LSTM unit). The buffers a kernel touches never overlap (see
// CellStep), which `#pragma GCC ivdep` tells the vectorizer: GCC does not carry __restrict on
// locals far enough to drop its alias checks.

namespace ember::kernels::cpu {
namespace {

struct FastMath {
  EMBER_CPU_INLINE static float sigmoid(float x) { return sigmoid_approx(x); }
  EMBER_CPU_INLINE static float tanh(float x) { return tanh_approx(x); }
};

struct LibmMath {
  static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
  static double tanh(double x) { return std::tanh(x); }
};

template <typename T, typename M>
EMBER_CPU_INLINE void lstm_forward_body(const CellStep<T>& s, int64_t j0, int64_t j1) {
  const int64_t H = s.hidden;
  for (int64_t j = j0; j < j1; ++j) {
    T* __restrict gi = s.gates + j * 4 * H;
    T* __restrict gf = gi + H;
    T* __restrict gg = gf + H;
    T* __restrict go = gg + H;
    T* __restrict c = s.c + j * H;
    T* __restrict h = s.h + j * H;
    T* __restrict cp = s.cprev + j * H;
    T* __restrict tc = s.tanhc + j * H;
    T* __restrict y = s.y + j * s.ldy;
    #pragma GCC ivdep
    for (int64_t k = 0; k < H; ++k) {
      T i = gi[k], f = gf[k], g = gg[k], o = go[k], cn = c[k], t;
      cp[k] = cn;
      const T h_new = lstm_forward_unit<T, M>(i, f, g, o, cn, t);
      gi[k] = i;
      gf[k] = f;
      gg[k] = g;
      go[k] = o;
      tc[k] = t;
      c[k] = cn;
      h[k] = h_new;
      y[k] = h_new;
    }
  }
}

template <typename T>
EMBER_CPU_INLINE void add_dy(const CellStep<T>& s, int64_t j, T* __restrict dh) {
  if (s.dy == nullptr) return;
  const T* __restrict dy = s.dy + j * s.ldy;
  #pragma GCC ivdep
  for (int64_t k = 0; k < s.hidden; ++k) dh[k] += dy[k];
}

template <typename T>
EMBER_CPU_INLINE void lstm_backward_body(const CellStep<T>& s, int64_t j0, int64_t j1) {
  const int64_t H = s.hidden;
  for (int64_t j = j0; j < j1; ++j) {
    const T* __restrict gi = s.gates + j * 4 * H;
    const T* __restrict gf = gi + H;
    const T* __restrict gg = gf + H;
    const T* __restrict go = gg + H;
    const T* __restrict cp = s.cprev + j * H;
    const T* __restrict tc = s.tanhc + j * H;
    T* __restrict dh = s.dh + j * H;
    T* __restrict dc = s.dc + j * H;
    T* __restrict di = s.dgates + j * 4 * H;
    T* __restrict df = di + H;
    T* __restrict dg = df + H;
    T* __restrict dout = dg + H;
    add_dy(s, j, dh);
    #pragma GCC ivdep
    for (int64_t k = 0; k < H; ++k) {
      T dck = dc[k];
      lstm_backward_unit<T>(gi[k], gf[k], gg[k], go[k], cp[k], tc[k], dh[k], dck, di[k], df[k], dg[k], dout[k]);
      dc[k] = dck;
    }
  }
}

template <typename T, typename M>
EMBER_CPU_INLINE void gru_forward_body(const CellStep<T>& s, int64_t j0, int64_t j1) {
  const int64_t H = s.hidden;
  for (int64_t j = j0; j < j1; ++j) {
    T* __restrict xr = s.gates + j * 3 * H;
    T* __restrict xz = xr + H;
    T* __restrict xn = xz + H;
    const T* __restrict hr = s.gh + j * 3 * H;
    const T* __restrict hz = hr + H;
    const T* __restrict hn = hz + H;
    T* __restrict h = s.h + j * H;
    T* __restrict y = s.y + j * s.ldy;
    #pragma GCC ivdep
    for (int64_t k = 0; k < H; ++k) {
      T r = xr[k], z = xz[k], n = xn[k];
      const T h_new = gru_forward_unit<T, M>(r, z, n, hr[k], hz[k], hn[k], h[k]);
      xr[k] = r;
      xz[k] = z;
      xn[k] = n;
      h[k] = h_new;
      y[k] = h_new;
    }
  }
}

template <typename T>
EMBER_CPU_INLINE void gru_backward_body(const CellStep<T>& s, int64_t j0, int64_t j1) {
  const int64_t H = s.hidden;
  for (int64_t j = j0; j < j1; ++j) {
    const T* __restrict gr = s.gates + j * 3 * H;
    const T* __restrict gz = gr + H;
    const T* __restrict gn = gz + H;
    const T* __restrict hn = s.gh + j * 3 * H + 2 * H;
    const T* __restrict hp = s.hprev + j * H;
    T* __restrict dh = s.dh + j * H;
    T* __restrict dxr = s.dgates + j * 3 * H;
    T* __restrict dxz = dxr + H;
    T* __restrict dxn = dxz + H;
    T* __restrict dhr = s.dgh + j * 3 * H;
    T* __restrict dhz = dhr + H;
    T* __restrict dhn = dhz + H;
    add_dy(s, j, dh);
    #pragma GCC ivdep
    for (int64_t k = 0; k < H; ++k) {
      T d = dh[k];
      gru_backward_unit<T>(gr[k], gz[k], gn[k], hn[k], hp[k], d, dxr[k], dxz[k], dxn[k], dhr[k], dhz[k], dhn[k]);
      dh[k] = d;
    }
  }
}

template <typename T, typename M>
EMBER_CPU_INLINE void rnn_forward_body(const CellStep<T>& s, bool relu, int64_t j0, int64_t j1) {
  const int64_t H = s.hidden;
  for (int64_t j = j0; j < j1; ++j) {
    T* __restrict g = s.gates + j * H;
    T* __restrict h = s.h + j * H;
    T* __restrict y = s.y + j * s.ldy;
    if (relu) {
      #pragma GCC ivdep
      for (int64_t k = 0; k < H; ++k) {
        const T v = rnn_forward_unit<T, M>(g[k], true);
        g[k] = v;
        h[k] = v;
        y[k] = v;
      }
    } else {
      #pragma GCC ivdep
      for (int64_t k = 0; k < H; ++k) {
        const T v = rnn_forward_unit<T, M>(g[k], false);
        g[k] = v;
        h[k] = v;
        y[k] = v;
      }
    }
  }
}

template <typename T>
EMBER_CPU_INLINE void rnn_backward_body(const CellStep<T>& s, bool relu, int64_t j0, int64_t j1) {
  const int64_t H = s.hidden;
  for (int64_t j = j0; j < j1; ++j) {
    const T* __restrict g = s.gates + j * H;
    T* __restrict dh = s.dh + j * H;
    T* __restrict dg = s.dgates + j * H;
    add_dy(s, j, dh);
    if (relu) {
      #pragma GCC ivdep
      for (int64_t k = 0; k < H; ++k) dg[k] = rnn_backward_unit<T>(g[k], dh[k], true);
    } else {
      #pragma GCC ivdep
      for (int64_t k = 0; k < H; ++k) dg[k] = rnn_backward_unit<T>(g[k], dh[k], false);
    }
  }
}

}  // namespace

EMBER_CPU_ISA_VARIANTS(void, lstm_forward_rows_f32, (const CellStep<float>& s, int64_t j0, int64_t j1), (s, j0, j1),
                       (lstm_forward_body<float, FastMath>(s, j0, j1)))
EMBER_CPU_ISA_VARIANTS(void, lstm_backward_rows_f32, (const CellStep<float>& s, int64_t j0, int64_t j1), (s, j0, j1),
                       lstm_backward_body<float>(s, j0, j1))
EMBER_CPU_ISA_VARIANTS(void, gru_forward_rows_f32, (const CellStep<float>& s, int64_t j0, int64_t j1), (s, j0, j1),
                       (gru_forward_body<float, FastMath>(s, j0, j1)))
EMBER_CPU_ISA_VARIANTS(void, gru_backward_rows_f32, (const CellStep<float>& s, int64_t j0, int64_t j1), (s, j0, j1),
                       gru_backward_body<float>(s, j0, j1))
EMBER_CPU_ISA_VARIANTS(void, rnn_forward_rows_f32, (const CellStep<float>& s, bool relu, int64_t j0, int64_t j1),
                       (s, relu, j0, j1), (rnn_forward_body<float, FastMath>(s, relu, j0, j1)))
EMBER_CPU_ISA_VARIANTS(void, rnn_backward_rows_f32, (const CellStep<float>& s, bool relu, int64_t j0, int64_t j1),
                       (s, relu, j0, j1), rnn_backward_body<float>(s, relu, j0, j1))

void lstm_forward_rows(const CellStep<float>& s, int64_t j0, int64_t j1) { lstm_forward_rows_f32(s, j0, j1); }
void lstm_forward_rows(const CellStep<double>& s, int64_t j0, int64_t j1) {
  lstm_forward_body<double, LibmMath>(s, j0, j1);
}
void lstm_backward_rows(const CellStep<float>& s, int64_t j0, int64_t j1) { lstm_backward_rows_f32(s, j0, j1); }
void lstm_backward_rows(const CellStep<double>& s, int64_t j0, int64_t j1) { lstm_backward_body<double>(s, j0, j1); }
void gru_forward_rows(const CellStep<float>& s, int64_t j0, int64_t j1) { gru_forward_rows_f32(s, j0, j1); }
void gru_forward_rows(const CellStep<double>& s, int64_t j0, int64_t j1) {
  gru_forward_body<double, LibmMath>(s, j0, j1);
}
void gru_backward_rows(const CellStep<float>& s, int64_t j0, int64_t j1) { gru_backward_rows_f32(s, j0, j1); }
void gru_backward_rows(const CellStep<double>& s, int64_t j0, int64_t j1) { gru_backward_body<double>(s, j0, j1); }
void rnn_forward_rows(const CellStep<float>& s, bool relu, int64_t j0, int64_t j1) {
  rnn_forward_rows_f32(s, relu, j0, j1);
}
void rnn_forward_rows(const CellStep<double>& s, bool relu, int64_t j0, int64_t j1) {
  rnn_forward_body<double, LibmMath>(s, relu, j0, j1);
}
void rnn_backward_rows(const CellStep<float>& s, bool relu, int64_t j0, int64_t j1) {
  rnn_backward_rows_f32(s, relu, j0, j1);
}
void rnn_backward_rows(const CellStep<double>& s, bool relu, int64_t j0, int64_t j1) {
  rnn_backward_body<double>(s, relu, j0, j1);
}

}  // namespace ember::kernels::cpu
