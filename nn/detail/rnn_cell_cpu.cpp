#include "nn/detail/rnn_cell_cpu.h"

#include <algorithm>
#include <bit>
#include <cmath>

// Note [RNN pointwise dispatch]
// The float32 kernels are compiled three times (baseline x86-64, x86-64-v3 = AVX2+FMA,
// x86-64-v4 = AVX-512) with GCC's target_clones; the loader picks the best one for the CPU
// once (ifunc). Their exp/tanh are polynomial approximations written so the inner loop over the
// hidden units vectorizes: libm's scalar expf/tanhf would dominate a step (five transcendentals
// per LSTM unit). The math helpers are always_inline so each clone gets its own vector code.
// The buffers a kernel touches never overlap (see CellStep), which `#pragma GCC ivdep` tells
// the vectorizer: GCC does not carry __restrict on locals far enough to drop its alias checks.
// Sanitizer builds use the baseline only (ifunc resolvers run before the sanitizer runtime).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define EMBER_RNN_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define EMBER_RNN_CLONES
#endif
#define EMBER_RNN_INLINE [[gnu::always_inline]] inline

namespace ember::nn::detail {
namespace {

// exp for x in [-87, 88] (clamped outside): Cephes' expf polynomial after range reduction by
// ln 2, rounding with the 1.5 * 2^23 trick so every operation vectorizes. ~1 ulp.
EMBER_RNN_INLINE float exp_approx(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float magic = 12582912.0f;
  float t = x * 1.44269504088896341f + magic;
  int32_t n = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(magic);
  float nf = t - magic;
  float r = x - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * r * r + r + 1.0f;
  return p * std::bit_cast<float>((n + 127) << 23);
}

struct FastMath {
  EMBER_RNN_INLINE static float sigmoid(float x) { return 1.0f / (1.0f + exp_approx(-x)); }
  // |x| < 0.625: Cephes' tanhf odd polynomial (no cancellation near 0); else 1 - 2/(e^2|x| + 1).
  EMBER_RNN_INLINE static float tanh(float x) {
    float ax = std::fabs(x);
    float big = 1.0f - 2.0f / (exp_approx(2.0f * ax) + 1.0f);
    float z = x * x;
    float s = -5.70498872745E-3f;
    s = s * z + 2.06390887954E-2f;
    s = s * z - 5.37397155531E-2f;
    s = s * z + 1.33314422036E-1f;
    s = s * z - 3.33332819422E-1f;
    s = s * z * ax + ax;
    return std::copysign(ax < 0.625f ? s : big, x);
  }
};

struct LibmMath {
  static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
  static double tanh(double x) { return std::tanh(x); }
};

// ---- LSTM: gates i, f, g, o ------------------------------------------------------------------

template <typename T, typename M>
EMBER_RNN_INLINE void lstm_forward_body(const CellStep<T>& s, int64_t j0, int64_t j1) {
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
      T i = M::sigmoid(gi[k]);
      T f = M::sigmoid(gf[k]);
      T g = M::tanh(gg[k]);
      T o = M::sigmoid(go[k]);
      T c_old = c[k];
      T c_new = f * c_old + i * g;
      T t = M::tanh(c_new);
      T h_new = o * t;
      gi[k] = i;
      gf[k] = f;
      gg[k] = g;
      go[k] = o;
      cp[k] = c_old;
      tc[k] = t;
      c[k] = c_new;
      h[k] = h_new;
      y[k] = h_new;
    }
  }
}

template <typename T>
EMBER_RNN_INLINE void lstm_backward_body(const CellStep<T>& s, int64_t j0, int64_t j1) {
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
    if (s.dy != nullptr) {
      const T* __restrict dy = s.dy + j * s.ldy;
      #pragma GCC ivdep
      for (int64_t k = 0; k < H; ++k) dh[k] += dy[k];
    }
    #pragma GCC ivdep
    for (int64_t k = 0; k < H; ++k) {
      T i = gi[k], f = gf[k], g = gg[k], o = go[k], t = tc[k];
      T dhk = dh[k];
      T dck = dc[k] + dhk * o * (T(1) - t * t);
      di[k] = dck * g * i * (T(1) - i);
      df[k] = dck * cp[k] * f * (T(1) - f);
      dg[k] = dck * i * (T(1) - g * g);
      dout[k] = dhk * t * o * (T(1) - o);
      dc[k] = dck * f;
    }
  }
}

// ---- GRU: gates r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn)) ------------------------

template <typename T, typename M>
EMBER_RNN_INLINE void gru_forward_body(const CellStep<T>& s, int64_t j0, int64_t j1) {
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
      T r = M::sigmoid(xr[k] + hr[k]);
      T z = M::sigmoid(xz[k] + hz[k]);
      T n = M::tanh(xn[k] + r * hn[k]);
      T h_new = (T(1) - z) * n + z * h[k];
      xr[k] = r;
      xz[k] = z;
      xn[k] = n;
      h[k] = h_new;
      y[k] = h_new;
    }
  }
}

template <typename T>
EMBER_RNN_INLINE void gru_backward_body(const CellStep<T>& s, int64_t j0, int64_t j1) {
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
    if (s.dy != nullptr) {
      const T* __restrict dy = s.dy + j * s.ldy;
      #pragma GCC ivdep
      for (int64_t k = 0; k < H; ++k) dh[k] += dy[k];
    }
    #pragma GCC ivdep
    for (int64_t k = 0; k < H; ++k) {
      T r = gr[k], z = gz[k], n = gn[k];
      T d = dh[k];
      T dn_pre = d * (T(1) - z) * (T(1) - n * n);
      T dz_pre = d * (hp[k] - n) * z * (T(1) - z);
      T dr_pre = dn_pre * hn[k] * r * (T(1) - r);
      dxr[k] = dr_pre;
      dxz[k] = dz_pre;
      dxn[k] = dn_pre;
      dhr[k] = dr_pre;
      dhz[k] = dz_pre;
      dhn[k] = dn_pre * r;
      dh[k] = d * z;  // the direct path; the caller adds dgh @ W_hh
    }
  }
}

// ---- Elman RNN: h = act(pre) --------------------------------------------------------------------

template <typename T, typename M>
EMBER_RNN_INLINE void rnn_forward_body(const CellStep<T>& s, bool relu, int64_t j0, int64_t j1) {
  const int64_t H = s.hidden;
  for (int64_t j = j0; j < j1; ++j) {
    T* __restrict g = s.gates + j * H;
    T* __restrict h = s.h + j * H;
    T* __restrict y = s.y + j * s.ldy;
    if (relu) {
      #pragma GCC ivdep
      for (int64_t k = 0; k < H; ++k) {
        T v = g[k] > T(0) ? g[k] : T(0);
        g[k] = v;
        h[k] = v;
        y[k] = v;
      }
    } else {
      #pragma GCC ivdep
      for (int64_t k = 0; k < H; ++k) {
        T v = M::tanh(g[k]);
        g[k] = v;
        h[k] = v;
        y[k] = v;
      }
    }
  }
}

template <typename T>
EMBER_RNN_INLINE void rnn_backward_body(const CellStep<T>& s, bool relu, int64_t j0, int64_t j1) {
  const int64_t H = s.hidden;
  for (int64_t j = j0; j < j1; ++j) {
    const T* __restrict g = s.gates + j * H;
    T* __restrict dh = s.dh + j * H;
    T* __restrict dg = s.dgates + j * H;
    if (s.dy != nullptr) {
      const T* __restrict dy = s.dy + j * s.ldy;
      #pragma GCC ivdep
      for (int64_t k = 0; k < H; ++k) dh[k] += dy[k];
    }
    if (relu) {
      #pragma GCC ivdep
      for (int64_t k = 0; k < H; ++k) dg[k] = g[k] > T(0) ? dh[k] : T(0);
    } else {
      #pragma GCC ivdep
      for (int64_t k = 0; k < H; ++k) dg[k] = dh[k] * (T(1) - g[k] * g[k]);
    }
  }
}

}  // namespace

EMBER_RNN_CLONES void lstm_forward_rows(const CellStep<float>& s, int64_t j0, int64_t j1) {
  lstm_forward_body<float, FastMath>(s, j0, j1);
}
void lstm_forward_rows(const CellStep<double>& s, int64_t j0, int64_t j1) {
  lstm_forward_body<double, LibmMath>(s, j0, j1);
}
EMBER_RNN_CLONES void lstm_backward_rows(const CellStep<float>& s, int64_t j0, int64_t j1) {
  lstm_backward_body<float>(s, j0, j1);
}
void lstm_backward_rows(const CellStep<double>& s, int64_t j0, int64_t j1) { lstm_backward_body<double>(s, j0, j1); }

EMBER_RNN_CLONES void gru_forward_rows(const CellStep<float>& s, int64_t j0, int64_t j1) {
  gru_forward_body<float, FastMath>(s, j0, j1);
}
void gru_forward_rows(const CellStep<double>& s, int64_t j0, int64_t j1) {
  gru_forward_body<double, LibmMath>(s, j0, j1);
}
EMBER_RNN_CLONES void gru_backward_rows(const CellStep<float>& s, int64_t j0, int64_t j1) {
  gru_backward_body<float>(s, j0, j1);
}
void gru_backward_rows(const CellStep<double>& s, int64_t j0, int64_t j1) { gru_backward_body<double>(s, j0, j1); }

EMBER_RNN_CLONES void rnn_forward_rows(const CellStep<float>& s, bool relu, int64_t j0, int64_t j1) {
  rnn_forward_body<float, FastMath>(s, relu, j0, j1);
}
void rnn_forward_rows(const CellStep<double>& s, bool relu, int64_t j0, int64_t j1) {
  rnn_forward_body<double, LibmMath>(s, relu, j0, j1);
}
EMBER_RNN_CLONES void rnn_backward_rows(const CellStep<float>& s, bool relu, int64_t j0, int64_t j1) {
  rnn_backward_body<float>(s, relu, j0, j1);
}
void rnn_backward_rows(const CellStep<double>& s, bool relu, int64_t j0, int64_t j1) {
  rnn_backward_body<double>(s, relu, j0, j1);
}

}  // namespace ember::nn::detail
