// Losses of nn::functional: cross_entropy, nll_loss, mse_loss, binary_cross_entropy_with_logits.
// See Note [Class-index loss kernels].
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "autograd/node.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/thread_pool.h"
#include "nn/functional.h"

namespace ember::nn::functional {

using autograd::FunctionNode;
using autograd::SavedVariable;
using autograd::TensorList;

// Note [Class-index loss kernels]
// cross_entropy and nll_loss over class indices view the input as [N, C, S] (S = product of
// the trailing dims d1...; 1 for [N, C]) and the target as [N * S]. On CPU in float32/float64
// one node does log_softmax + gather + weighting + reduction forward, and backward rebuilds
// softmax from the saved per-row log-sum-exp instead of saving a [N, C] log-probability tensor.
// Sums are in double and run serially in row order, so results do not depend on the thread
// count; float32 rows with the class dim innermost compute softmax terms in float with a
// vectorizable exp (fast_expf), everything else in double. Per element (t the target, w[t] its weight, W_C = sum_c w_c, ls the label
// smoothing, lse the row's log-sum-exp):
//   l    = (1 - ls) * w[t] * (lse - x_t) + ls / C * sum_c w_c * (lse - x_c)
//   dl/dx_c = (1 - ls) * w[t] * (p_c - [c == t]) + ls / C * (W_C * p_c - w_c)
// and 'mean' divides the sum over non-ignored elements by sum w[t] over them, which is
// PyTorch's definition (nll_loss's weighted mean; label smoothing normalized the same way).

namespace {

struct ClassLayout {
  int64_t N = 0, C = 0, S = 1;
  IntList out_sizes;  // per-element loss shape (the target's)
};

ClassLayout check_class_target(const Tensor& input, const Tensor& target, const Tensor& weight, const char* op) {
  EMBER_CHECK_T(ValueError, input.dim() >= 1, op, ": Expected 1 or more dimensions (got ", input.dim(), ")");
  EMBER_CHECK_T(TypeError, target.dtype() == kInt64 || target.dtype() == kInt32, op,
                ": expected target of dtype int64 (class indices), got ", target.dtype());
  ClassLayout L;
  if (input.dim() == 1) {
    EMBER_CHECK_T(ValueError, target.dim() == 0, op, ": 0D target tensor expected for 1-D (unbatched) input of shape ",
                  input.sizes(), ", got target of shape ", target.sizes());
    L.N = 1;
    L.C = input.sizes()[0];
  } else {
    EMBER_CHECK_T(ValueError, target.dim() >= 1 && input.sizes()[0] == target.sizes()[0], op,
                  ": Expected input batch_size (", input.sizes()[0], ") to match target batch_size (",
                  target.dim() >= 1 ? target.sizes()[0] : 0, ").");
    L.N = input.sizes()[0];
    L.C = input.sizes()[1];
    if (input.dim() == 2) {
      EMBER_CHECK_T(ValueError, target.dim() == 1, op,
                    ": 0D or 1D target tensor expected, multi-target not supported (input ", input.sizes(),
                    ", target ", target.sizes(), ")");
    } else {
      IntList expected{L.N};
      expected.insert(expected.end(), input.sizes().begin() + 2, input.sizes().end());
      EMBER_CHECK_T(ValueError, target.sizes() == expected, op, ": Expected target size ", expected, ", got ",
                    target.sizes());
      for (int64_t d = 2; d < input.dim(); ++d) L.S *= input.sizes()[static_cast<size_t>(d)];
    }
  }
  L.out_sizes = target.sizes();
  EMBER_CHECK_T(ValueError, !weight.defined() || (weight.dim() == 1 && weight.numel() == L.C), op,
                ": weight tensor should be defined either for all ", L.C,
                " classes or no classes but got weight tensor of shape: ", weight.sizes());
  return L;
}

void check_target_values(const std::vector<int64_t>& t, int64_t C, int64_t ignore_index) {
  for (int64_t v : t) {
    if (v == ignore_index) continue;
    EMBER_CHECK_T(IndexError, v >= 0 && v < C, "Target ", v, " is out of bounds.");
  }
}

bool fused_ok(const Tensor& input, const Tensor& target, const Tensor& weight) {
  if (!input.device().is_cpu() || !target.device().is_cpu()) return false;
  if (input.dtype() != kFloat32 && input.dtype() != kFloat64) return false;
  if (weight.defined() && (!weight.device().is_cpu() || weight.requires_grad())) return false;
  return input.numel() > 0;
}

Tensor reduce_loss(const Tensor& l, Reduction r) {
  switch (r) {
    case Reduction::None: return l;
    case Reduction::Sum: return ember::sum(l);
    case Reduction::Mean: return ember::mean(l);
  }
  return l;
}

struct ClassLossSaved {
  ClassLayout L;
  std::vector<int64_t> target;
  std::vector<double> weight;  // empty: all ones
  std::vector<double> lse;     // cross_entropy only
  double total_weight = 0.0;
  double label_smoothing = 0.0;
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
  DType dtype = kFloat32;
  IntList input_sizes;
};

// exp for float rows, written so that GCC vectorizes the loops that call it (no libm call):
// Cephes' expf -- x = n ln2 + r with |r| <= ln2 / 2, a degree-6 polynomial for e^r, and 2^n
// built in the exponent bits. Relative error below 2 ulp on [-87, 88]; inputs below -87 give
// ~1e-38 instead of a denormal (irrelevant next to the row's largest term, which is e^0 = 1).
inline float fast_expf(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float t = x * 1.44269504088896341f;
  float n = (t + 12582912.0f) - 12582912.0f;  // round to nearest (1.5 * 2^23 trick)
  n = n == n ? n : 0.0f;  // NaN in, NaN out (through r) without a NaN-to-int conversion
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// float32 rows of class dim contiguous (S == 1): the hot layout ([N, C] logits). Softmax terms
// in float (as PyTorch), sums and the loss in double.
void cross_entropy_forward_rows_f32(const float* x, ClassLossSaved& s, std::vector<double>& loss, double wc_sum) {
  const int64_t N = s.L.N, C = s.L.C;
  const bool has_w = !s.weight.empty();
  const double ls = s.label_smoothing;
  parallel_for(0, N, std::max<int64_t>(1, 4096 / std::max<int64_t>(C, 1)), [&](int64_t nb, int64_t ne) {
    std::vector<float> buf(static_cast<size_t>(C));
    for (int64_t n = nb; n < ne; ++n) {
      const size_t r = static_cast<size_t>(n);
      const int64_t t = s.target[r];
      if (t == s.ignore_index) {
        loss[r] = 0.0;
        s.lse[r] = 0.0;
        continue;
      }
      const float* row = x + n * C;
      float m0 = row[0], m1 = row[0], m2 = row[0], m3 = row[0];
      int64_t k = 0;
      for (; k + 4 <= C; k += 4) {
        m0 = row[k] > m0 ? row[k] : m0;
        m1 = row[k + 1] > m1 ? row[k + 1] : m1;
        m2 = row[k + 2] > m2 ? row[k + 2] : m2;
        m3 = row[k + 3] > m3 ? row[k + 3] : m3;
      }
      for (; k < C; ++k) m0 = row[k] > m0 ? row[k] : m0;
      m0 = m1 > m0 ? m1 : m0;
      m2 = m3 > m2 ? m3 : m2;
      const float m = m2 > m0 ? m2 : m0;
      for (int64_t c = 0; c < C; ++c) buf[static_cast<size_t>(c)] = fast_expf(row[c] - m);
      double se0 = 0, se1 = 0, se2 = 0, se3 = 0;
      int64_t c = 0;
      for (; c + 4 <= C; c += 4) {
        se0 += buf[static_cast<size_t>(c)];
        se1 += buf[static_cast<size_t>(c + 1)];
        se2 += buf[static_cast<size_t>(c + 2)];
        se3 += buf[static_cast<size_t>(c + 3)];
      }
      for (; c < C; ++c) se0 += buf[static_cast<size_t>(c)];
      const double lse = static_cast<double>(m) + std::log((se0 + se1) + (se2 + se3));
      s.lse[r] = lse;
      const double wt = has_w ? s.weight[static_cast<size_t>(t)] : 1.0;
      double l = (1.0 - ls) * wt * (lse - static_cast<double>(row[t]));
      if (ls > 0.0) {
        double wx = 0.0;
        for (int64_t k = 0; k < C; ++k) {
          wx += (has_w ? s.weight[static_cast<size_t>(k)] : 1.0) * static_cast<double>(row[k]);
        }
        l += ls / static_cast<double>(C) * (wc_sum * lse - wx);
      }
      loss[r] = l;
    }
  });
}

void cross_entropy_backward_rows_f32(const float* x, const ClassLossSaved& s, const float* g_elem, double g_scalar,
                                     float* gx, double wc_sum) {
  const int64_t N = s.L.N, C = s.L.C;
  const bool has_w = !s.weight.empty();
  const double ls = s.label_smoothing;
  std::vector<float> wf(has_w ? static_cast<size_t>(C) : 0);
  for (size_t c = 0; c < wf.size(); ++c) wf[c] = static_cast<float>(s.weight[c]);
  parallel_for(0, N, std::max<int64_t>(1, 4096 / std::max<int64_t>(C, 1)), [&](int64_t nb, int64_t ne) {
    for (int64_t n = nb; n < ne; ++n) {
      const size_t r = static_cast<size_t>(n);
      const int64_t t = s.target[r];
      float* out = gx + n * C;
      if (t == s.ignore_index) {
        for (int64_t c = 0; c < C; ++c) out[c] = 0.0f;
        continue;
      }
      const double scale = g_elem ? static_cast<double>(g_elem[r]) : g_scalar;
      const double wt = has_w ? s.weight[static_cast<size_t>(t)] : 1.0;
      // d_c = scale * ((1 - ls) w[t] (p_c - [c == t]) + ls / C (W_C p_c - w_c))
      //     = coef * p_c - smooth * w_c, then the target's -scale (1 - ls) w[t].
      const double sa = scale * (1.0 - ls) * wt, sb = scale * ls / static_cast<double>(C);
      const float coef = static_cast<float>(sa + sb * wc_sum), smooth = static_cast<float>(sb);
      const float lse = static_cast<float>(s.lse[r]);
      const float* row = x + n * C;
      if (ls > 0.0 && has_w) {
        for (int64_t c = 0; c < C; ++c) out[c] = coef * fast_expf(row[c] - lse) - smooth * wf[static_cast<size_t>(c)];
      } else if (ls > 0.0) {
        for (int64_t c = 0; c < C; ++c) out[c] = coef * fast_expf(row[c] - lse) - smooth;
      } else {
        for (int64_t c = 0; c < C; ++c) out[c] = coef * fast_expf(row[c] - lse);
      }
      out[t] -= static_cast<float>(sa);
    }
  });
}

// Forward for one row set: fills per-element losses, lse, and the total weight.
template <typename T>
void cross_entropy_forward_kernel(const T* x, ClassLossSaved& s, std::vector<double>& loss) {
  const int64_t N = s.L.N, C = s.L.C, S = s.L.S;
  const bool has_w = !s.weight.empty();
  double wc_sum = 0.0;
  for (int64_t c = 0; c < C; ++c) wc_sum += has_w ? s.weight[static_cast<size_t>(c)] : 1.0;
  if constexpr (std::is_same_v<T, float>) {
    if (S == 1) return cross_entropy_forward_rows_f32(x, s, loss, wc_sum);
  }
  const double ls = s.label_smoothing;
  parallel_for(0, N, std::max<int64_t>(1, 4096 / std::max<int64_t>(C * S, 1)), [&](int64_t nb, int64_t ne) {
    for (int64_t n = nb; n < ne; ++n) {
      for (int64_t sp = 0; sp < S; ++sp) {
        const size_t r = static_cast<size_t>(n * S + sp);
        const int64_t t = s.target[r];
        if (t == s.ignore_index) {
          loss[r] = 0.0;
          s.lse[r] = 0.0;
          continue;
        }
        const T* row = x + n * C * S + sp;
        double m = -INFINITY;
        for (int64_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(row[c * S]));
        double se = 0.0;
        for (int64_t c = 0; c < C; ++c) se += std::exp(static_cast<double>(row[c * S]) - m);
        const double lse = m + std::log(se);
        s.lse[r] = lse;
        const double wt = has_w ? s.weight[static_cast<size_t>(t)] : 1.0;
        double l = (1.0 - ls) * wt * (lse - static_cast<double>(row[t * S]));
        if (ls > 0.0) {
          double wx = 0.0;
          for (int64_t c = 0; c < C; ++c) {
            wx += (has_w ? s.weight[static_cast<size_t>(c)] : 1.0) * static_cast<double>(row[c * S]);
          }
          l += ls / static_cast<double>(C) * (wc_sum * lse - wx);
        }
        loss[r] = l;
      }
    }
  });
}

template <typename T>
void cross_entropy_backward_kernel(const T* x, const ClassLossSaved& s, const T* g_elem, double g_scalar, T* gx) {
  const int64_t N = s.L.N, C = s.L.C, S = s.L.S;
  const bool has_w = !s.weight.empty();
  double wc_sum = 0.0;
  for (int64_t c = 0; c < C; ++c) wc_sum += has_w ? s.weight[static_cast<size_t>(c)] : 1.0;
  if constexpr (std::is_same_v<T, float>) {
    if (S == 1) return cross_entropy_backward_rows_f32(x, s, g_elem, g_scalar, gx, wc_sum);
  }
  const double ls = s.label_smoothing;
  parallel_for(0, N, std::max<int64_t>(1, 4096 / std::max<int64_t>(C * S, 1)), [&](int64_t nb, int64_t ne) {
    for (int64_t n = nb; n < ne; ++n) {
      for (int64_t sp = 0; sp < S; ++sp) {
        const size_t r = static_cast<size_t>(n * S + sp);
        const int64_t t = s.target[r];
        T* out = gx + n * C * S + sp;
        if (t == s.ignore_index) {
          for (int64_t c = 0; c < C; ++c) out[c * S] = T(0);
          continue;
        }
        const double scale = g_elem ? static_cast<double>(g_elem[r]) : g_scalar;
        const T* row = x + n * C * S + sp;
        const double lse = s.lse[r];
        const double wt = has_w ? s.weight[static_cast<size_t>(t)] : 1.0;
        const double a = (1.0 - ls) * wt;
        const double b = ls / static_cast<double>(C);
        for (int64_t c = 0; c < C; ++c) {
          const double p = std::exp(static_cast<double>(row[c * S]) - lse);
          double d = a * (p - (c == t ? 1.0 : 0.0));
          if (ls > 0.0) d += b * (wc_sum * p - (has_w ? s.weight[static_cast<size_t>(c)] : 1.0));
          out[c * S] = static_cast<T>(scale * d);
        }
      }
    }
  });
}

template <typename T>
void nll_forward_kernel(const T* x, ClassLossSaved& s, std::vector<double>& loss) {
  const int64_t N = s.L.N, C = s.L.C, S = s.L.S;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t sp = 0; sp < S; ++sp) {
      const size_t r = static_cast<size_t>(n * S + sp);
      const int64_t t = s.target[r];
      if (t == s.ignore_index) {
        loss[r] = 0.0;
        continue;
      }
      const double wt = s.weight.empty() ? 1.0 : s.weight[static_cast<size_t>(t)];
      loss[r] = -wt * static_cast<double>(x[n * C * S + t * S + sp]);
    }
  }
}

template <typename T>
void nll_backward_kernel(const ClassLossSaved& s, const T* g_elem, double g_scalar, T* gx) {
  const int64_t N = s.L.N, C = s.L.C, S = s.L.S;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t sp = 0; sp < S; ++sp) {
      const size_t r = static_cast<size_t>(n * S + sp);
      const int64_t t = s.target[r];
      if (t == s.ignore_index) continue;
      const double wt = s.weight.empty() ? 1.0 : s.weight[static_cast<size_t>(t)];
      const double scale = g_elem ? static_cast<double>(g_elem[r]) : g_scalar;
      gx[n * C * S + t * S + sp] = static_cast<T>(-wt * scale);
    }
  }
}

// The shared driver of the fused class-index losses. `ce`: cross_entropy (else nll_loss).
Tensor fused_class_loss(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                        Reduction reduction, double label_smoothing, bool ce, const ClassLayout& L) {
  const char* name = ce ? "CrossEntropyLossBackward0" : "NllLossBackward0";
  auto s = std::make_shared<ClassLossSaved>();
  s->L = L;
  s->target = target.to_vector<int64_t>();
  check_target_values(s->target, L.C, ignore_index);
  if (weight.defined()) s->weight = weight.to_vector<double>();
  s->ignore_index = ignore_index;
  s->label_smoothing = label_smoothing;
  s->reduction = reduction;
  s->dtype = input.dtype();
  s->input_sizes = input.sizes();
  const size_t rows = static_cast<size_t>(L.N * L.S);
  if (ce) s->lse.assign(rows, 0.0);
  std::vector<double> loss(rows);
  Tensor x = native::contiguous(input);
  if (input.dtype() == kFloat32) {
    ce ? cross_entropy_forward_kernel(x.data_ptr<float>(), *s, loss) : nll_forward_kernel(x.data_ptr<float>(), *s, loss);
  } else {
    ce ? cross_entropy_forward_kernel(x.data_ptr<double>(), *s, loss) : nll_forward_kernel(x.data_ptr<double>(), *s, loss);
  }
  double total = 0.0, tw = 0.0;
  for (size_t r = 0; r < rows; ++r) {
    const int64_t t = s->target[r];
    if (t == ignore_index) continue;
    total += loss[r];
    tw += s->weight.empty() ? 1.0 : s->weight[static_cast<size_t>(t)];
  }
  s->total_weight = tw;
  Tensor out;
  if (reduction == Reduction::None) {
    out = native::reshape(native::to(from_vector(loss, {static_cast<int64_t>(rows)}), input.device(), input.dtype()),
                          L.out_sizes);
  } else {
    double v = reduction == Reduction::Sum ? total : total / tw;
    out = scalar_tensor(v, TensorOptions(input.dtype()).device(input.device()));
  }
  if (autograd::any_requires_grad({&input})) {
    SavedVariable sx(ce ? x : Tensor());
    autograd::record(name, {&input}, {&out}, [s, sx, ce, name](FunctionNode&, TensorList& g) {
      Tensor gc = native::contiguous(g[0]);
      if (gc.dtype() != s->dtype) gc = native::to(gc, s->dtype);
      const bool per_elem = s->reduction == Reduction::None;
      double gs = per_elem ? 0.0 : gc.item();
      if (s->reduction == Reduction::Mean) gs /= s->total_weight;
      const TensorOptions gopts = TensorOptions(s->dtype).device(gc.device());
      Tensor gx = ce ? empty(s->input_sizes, gopts) : zeros(s->input_sizes, gopts);
      auto run = [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        const T* ge = per_elem ? gc.data_ptr<T>() : nullptr;
        if (ce) {
          Tensor xv = sx.unpack(name);
          cross_entropy_backward_kernel<T>(xv.data_ptr<T>(), *s, ge, gs, gx.data_ptr<T>());
        } else {
          nll_backward_kernel<T>(*s, ge, gs, gx.data_ptr<T>());
        }
      };
      if (s->dtype == kFloat32) {
        run(static_cast<float*>(nullptr));
      } else {
        run(static_cast<double*>(nullptr));
      }
      return TensorList{gx};
    });
  }
  return out;
}

// Composite nll over log-probabilities `logp` ([N, C, d...] or [C]); `smooth_from` adds label smoothing.
Tensor composite_class_loss(const Tensor& logp, const Tensor& target_in, const Tensor& weight_in, int64_t ignore_index,
                            Reduction reduction, double label_smoothing, const ClassLayout& L) {
  Tensor target = target_in.dtype() == kInt64 ? target_in : native::to(target_in, kInt64);
  check_target_values(target.to_vector<int64_t>(), L.C, ignore_index);
  const bool unbatched = logp.dim() == 1;
  Tensor lp = unbatched ? ember::unsqueeze(logp, 0) : logp;
  Tensor tg = unbatched ? native::unsqueeze(target, 0) : target;
  Tensor weight = weight_in.defined() && weight_in.dtype() != logp.dtype() ? native::to(weight_in, logp.dtype()) : weight_in;
  Tensor valid = native::ne(tg, static_cast<double>(ignore_index));
  Tensor tsafe = native::where(valid, tg, zeros_like(tg));
  Tensor picked = ember::squeeze(ember::gather(lp, 1, native::unsqueeze(tsafe, 1)), 1);
  Tensor validf = native::to(valid, logp.dtype());
  Tensor wt = weight.defined()
                  ? native::mul(native::reshape(native::index_select(weight, 0, native::reshape(tsafe, {-1})), tg.sizes()),
                                validf)
                  : validf;
  Tensor l = ember::mul(ember::neg(picked), wt);
  if (label_smoothing > 0.0) {
    IntList wshape(static_cast<size_t>(lp.dim()), 1);
    wshape[1] = L.C;
    Tensor wl = weight.defined() ? ember::mul(lp, native::reshape(weight, wshape)) : lp;
    Tensor smooth = ember::mul(ember::neg(ember::sum(wl, {1})), validf);
    l = ember::add(ember::mul(l, 1.0 - label_smoothing),
                   ember::mul(smooth, label_smoothing / static_cast<double>(L.C)));
  }
  if (unbatched) l = ember::squeeze(l, 0);
  switch (reduction) {
    case Reduction::None: return l;
    case Reduction::Sum: return ember::sum(l);
    case Reduction::Mean: {
      const double total_weight = native::sum(wt, {}, false, kFloat64).item();
      // Every target ignored: NaN, as PyTorch, but with zero (not NaN) gradients, as PyTorch.
      if (total_weight == 0.0) return ember::add(ember::sum(l), std::nan(""));
      return ember::div(ember::sum(l), total_weight);
    }
  }
  return l;
}

Tensor cross_entropy_probs(const Tensor& input, const Tensor& target, const CrossEntropyOptions& o) {
  EMBER_CHECK_T(TypeError, target.is_floating_point(),
                "cross_entropy: Expected floating point type for target with class probabilities, got ",
                target.dtype());
  EMBER_CHECK_T(ValueError, o.ignore_index < 0, "cross_entropy: ignore_index is not supported for floating point target");
  const int64_t class_dim = input.dim() == 1 ? 0 : 1;
  const int64_t C = input.sizes()[static_cast<size_t>(class_dim)];
  EMBER_CHECK_T(ValueError, !o.weight.defined() || (o.weight.dim() == 1 && o.weight.numel() == C),
                "cross_entropy: weight tensor should be defined either for all ", C,
                " classes or no classes but got weight tensor of shape: ", o.weight.sizes());
  Tensor lp = ember::log_softmax(input, class_dim);
  Tensor t = target;
  if (o.label_smoothing > 0.0) {
    t = ember::add(ember::mul(t, 1.0 - o.label_smoothing), o.label_smoothing / static_cast<double>(C));
  }
  Tensor prod = ember::mul(lp, t);
  if (o.weight.defined()) {
    IntList wshape(static_cast<size_t>(input.dim()), 1);
    wshape[static_cast<size_t>(class_dim)] = C;
    Tensor w = o.weight.dtype() == input.dtype() ? o.weight : native::to(o.weight, input.dtype());
    prod = ember::mul(prod, native::reshape(w, wshape));
  }
  switch (o.reduction) {
    case Reduction::None: return ember::neg(ember::sum(prod, {class_dim}));
    case Reduction::Sum: return ember::neg(ember::sum(prod));
    case Reduction::Mean:
      return ember::div(ember::neg(ember::sum(prod)), static_cast<double>(input.numel() / std::max<int64_t>(C, 1)));
  }
  return prod;
}

void check_label_smoothing(double ls) {
  EMBER_CHECK_T(ValueError, ls >= 0.0 && ls <= 1.0, "cross_entropy: label_smoothing must be between 0.0 and 1.0. Got: ",
                ls);
}

bool is_probability_target(const Tensor& input, const Tensor& target) {
  return input.sizes() == target.sizes() && target.is_floating_point();
}

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options) {
  check_label_smoothing(options.label_smoothing);
  if (is_probability_target(input, target)) return cross_entropy_probs(input, target, options);
  ClassLayout L = check_class_target(input, target, options.weight, "cross_entropy");
  if (!fused_ok(input, target, options.weight)) return detail::cross_entropy_reference(input, target, options);
  return fused_class_loss(input, target, options.weight, options.ignore_index, options.reduction,
                          options.label_smoothing, true, L);
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& options) {
  ClassLayout L = check_class_target(input, target, options.weight, "nll_loss");
  if (!fused_ok(input, target, options.weight)) return detail::nll_loss_reference(input, target, options);
  return fused_class_loss(input, target, options.weight, options.ignore_index, options.reduction, 0.0, false, L);
}

Tensor detail::cross_entropy_reference(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options) {
  check_label_smoothing(options.label_smoothing);
  if (is_probability_target(input, target)) return cross_entropy_probs(input, target, options);
  ClassLayout L = check_class_target(input, target, options.weight, "cross_entropy");
  Tensor lp = ember::log_softmax(input, input.dim() == 1 ? 0 : 1);
  return composite_class_loss(lp, target, options.weight, options.ignore_index, options.reduction,
                              options.label_smoothing, L);
}

Tensor detail::nll_loss_reference(const Tensor& input, const Tensor& target, const NLLLossOptions& options) {
  ClassLayout L = check_class_target(input, target, options.weight, "nll_loss");
  return composite_class_loss(input, target, options.weight, options.ignore_index, options.reduction, 0.0, L);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  Tensor d = ember::sub(input, target);
  return reduce_loss(ember::mul(d, d), reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const BCEWithLogitsOptions& o) {
  EMBER_CHECK_T(ValueError, input.sizes() == target.sizes(), "binary_cross_entropy_with_logits: Target size (",
                target.sizes(), ") must be the same as input size (", input.sizes(), ")");
  // max_val = max(-x, 0); softplus(-x) = log(exp(-max_val) + exp(-x - max_val)) + max_val
  Tensor neg_x = ember::neg(input);
  Tensor max_val = ember::clamp(neg_x, 0.0, std::nullopt);
  Tensor soft = ember::add(
      ember::log(ember::add(ember::exp(ember::neg(max_val)), ember::exp(ember::sub(neg_x, max_val)))), max_val);
  Tensor l;
  if (o.pos_weight.defined()) {
    Tensor log_weight = ember::add(ember::mul(ember::sub(o.pos_weight, 1.0), target), 1.0);
    l = ember::add(ember::mul(ember::rsub(target, 1.0), input), ember::mul(log_weight, soft));
  } else {
    l = ember::add(ember::mul(ember::rsub(target, 1.0), input), soft);
  }
  if (o.weight.defined()) l = ember::mul(l, o.weight);
  return reduce_loss(l, o.reduction);
}

}  // namespace ember::nn::functional
