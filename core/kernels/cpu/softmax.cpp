#include "core/kernels/cpu/softmax.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/kernels/cpu/isa.h"
#include "core/kernels/cpu/softmax_rows.h"
#include "core/kernels/cpu/vec_math.h"
#include "core/kernels/softmax.h"
#include "core/thread_pool.h"

namespace ember::kernels::cpu {
namespace {

constexpr int64_t kGrainElements = 16384;

template <int W>
EMBER_CPU_INLINE void forward_rows(const float* x, float* y, int64_t C, int64_t r0, int64_t r1, bool log) {
  using V = vfloat<W>;
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * C;
    float* yr = y + r * C;
    const float m = safe_max(row_max<W>(xr, C));
    if (log) {
      const float lse = m + std::log(row_sum_exp<W>(xr, nullptr, C, m));
      const V lv = splat<V>(lse);
      int64_t c = 0;
      for (; c + W <= C; c += W) store(yr + c, load<V>(xr + c) - lv);
      for (; c < C; ++c) yr[c] = xr[c] - lse;
    } else {
      const float inv = 1.0f / row_sum_exp<W>(xr, yr, C, m);
      const V iv = splat<V>(inv);
      int64_t c = 0;
      for (; c + W <= C; c += W) store(yr + c, load<V>(yr + c) * iv);
      for (; c < C; ++c) yr[c] *= inv;
    }
  }
}

template <int W>
EMBER_CPU_INLINE void backward_rows(const float* g, const float* y, float* gx, int64_t C, int64_t r0, int64_t r1,
                                    bool log) {
  using V = vfloat<W>;
  for (int64_t r = r0; r < r1; ++r) {
    const float* gr = g + r * C;
    const float* yr = y + r * C;
    float* o = gx + r * C;
    V s0 = splat<V>(0.0f), s1 = s0;
    int64_t c = 0;
    if (log) {
      for (; c + 2 * W <= C; c += 2 * W) {
        s0 += load<V>(gr + c);
        s1 += load<V>(gr + c + W);
      }
      for (; c + W <= C; c += W) s0 += load<V>(gr + c);
    } else {
      for (; c + 2 * W <= C; c += 2 * W) {
        s0 += load<V>(gr + c) * load<V>(yr + c);
        s1 += load<V>(gr + c + W) * load<V>(yr + c + W);
      }
      for (; c + W <= C; c += W) s0 += load<V>(gr + c) * load<V>(yr + c);
    }
    float s = hsum<W>(s0 + s1);
    for (; c < C; ++c) s += log ? gr[c] : gr[c] * yr[c];
    const V sv = splat<V>(s);
    c = 0;
    if (log) {
      for (; c + W <= C; c += W) store(o + c, load<V>(gr + c) - exp_approx(load<V>(yr + c)) * sv);
      for (; c < C; ++c) o[c] = gr[c] - exp_approx(yr[c]) * s;
    } else {
      for (; c + W <= C; c += W) store(o + c, load<V>(yr + c) * (load<V>(gr + c) - sv));
      for (; c < C; ++c) o[c] = yr[c] * (gr[c] - s);
    }
  }
}

template <int W>
EMBER_CPU_INLINE void stats_rows(const float* x, int64_t C, int64_t r0, int64_t r1, float* mx, float* sm) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * C;
    const float m = safe_max(row_max<W>(xr, C));
    mx[r - r0] = m;
    sm[r - r0] = row_sum_exp<W>(xr, nullptr, C, m);
  }
}

}  // namespace

EMBER_CPU_ISA_VARIANTS(void, forward_rows_f32, (const float* x, float* y, int64_t C, int64_t r0, int64_t r1, bool log),
                       (x, y, C, r0, r1, log), forward_rows<kW>(x, y, C, r0, r1, log))
EMBER_CPU_ISA_VARIANTS(void, backward_rows_f32,
                       (const float* g, const float* y, float* gx, int64_t C, int64_t r0, int64_t r1, bool log),
                       (g, y, gx, C, r0, r1, log), backward_rows<kW>(g, y, gx, C, r0, r1, log))
EMBER_CPU_ISA_VARIANTS(void, softmax_row_stats_f32,
                       (const float* x, int64_t C, int64_t r0, int64_t r1, float* max_out, float* sum_out),
                       (x, C, r0, r1, max_out, sum_out), stats_rows<kW>(x, C, r0, r1, max_out, sum_out))

namespace {

// Runs f(line) for every line along the middle dim of [outer, n, inner] (the line functors of
// core/kernels/softmax.h), over the thread pool when there is enough work.
template <typename F>
void for_each_line(int64_t outer, int64_t n, int64_t inner, const F& f) {
  const int64_t lines = outer * inner;
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t l = b; l < e; ++l) f(l);
  };
  if (lines * n < 2 * kGrainElements) {
    body(0, lines);
  } else {
    parallel_for(0, lines, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(n, 1)), body);
  }
}

template <typename F>
void for_rows(int64_t rows, int64_t C, const F& f) {
  if (rows * C < 2 * kGrainElements) {
    f(0, rows);
  } else {
    parallel_for(0, rows, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(C, 1)), f);
  }
}

template <typename T>
void forward_lines(const T* in, T* o, int64_t outer, int64_t n, int64_t inner, bool log) {
  for_each_line(outer, n, inner, SoftmaxLineF<T>{LineGeometry{inner, n}, log, in, o});
}

template <typename T>
void backward_lines(const T* gp, const T* yp, T* o, int64_t outer, int64_t n, int64_t inner, bool log) {
  for_each_line(outer, n, inner, SoftmaxBackwardLineF<T>{LineGeometry{inner, n}, log, gp, yp, o});
}

}  // namespace

void softmax_forward(DType dtype, int64_t outer, int64_t n, int64_t inner, bool log, const void* x, void* y,
                     int /*device_index*/) {
  if (outer * n * inner == 0) return;
  if (dtype == kFloat32 && inner == 1) {
    const auto* xf = static_cast<const float*>(x);
    auto* yf = static_cast<float*>(y);
    for_rows(outer, n, [&](int64_t r0, int64_t r1) { forward_rows_f32(xf, yf, n, r0, r1, log); });
  } else if (dtype == kFloat32) {
    forward_lines(static_cast<const float*>(x), static_cast<float*>(y), outer, n, inner, log);
  } else {
    EMBER_INTERNAL_ASSERT(dtype == kFloat64, "softmax_forward: dtype ", dtype);
    forward_lines(static_cast<const double*>(x), static_cast<double*>(y), outer, n, inner, log);
  }
}

void softmax_backward(DType dtype, int64_t outer, int64_t n, int64_t inner, bool log, const void* g, const void* y,
                      void* gx, int /*device_index*/) {
  if (outer * n * inner == 0) return;
  if (dtype == kFloat32 && inner == 1) {
    const auto* gf = static_cast<const float*>(g);
    const auto* yf = static_cast<const float*>(y);
    auto* of = static_cast<float*>(gx);
    for_rows(outer, n, [&](int64_t r0, int64_t r1) { backward_rows_f32(gf, yf, of, n, r0, r1, log); });
  } else if (dtype == kFloat32) {
    backward_lines(static_cast<const float*>(g), static_cast<const float*>(y), static_cast<float*>(gx), outer, n,
                   inner, log);
  } else {
    EMBER_INTERNAL_ASSERT(dtype == kFloat64, "softmax_backward: dtype ", dtype);
    backward_lines(static_cast<const double*>(g), static_cast<const double*>(y), static_cast<double*>(gx), outer, n,
                   inner, log);
  }
}

}  // namespace ember::kernels::cpu
