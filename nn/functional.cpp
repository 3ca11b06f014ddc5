// Layer functions of nn::functional: linear, embedding, dropout, layer_norm, activations.
// Losses are in functional_loss.cpp.
#include <cmath>
#include <cstring>
#include <numbers>
#include <sstream>
#include <vector>

#include "autograd/node.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "core/thread_pool.h"
#include "nn/functional.h"

namespace ember::nn::functional {

using autograd::FunctionNode;
using autograd::SavedVariable;
using autograd::TensorList;

Reduction reduction_from_string(const std::string& s) {
  if (s == "none") return Reduction::None;
  if (s == "mean") return Reduction::Mean;
  if (s == "sum") return Reduction::Sum;
  EMBER_THROW(ValueError, s, " is not a valid value for reduction");
}

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::None: return "none";
    case Reduction::Mean: return "mean";
    case Reduction::Sum: return "sum";
  }
  return "?";
}

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  return ember::linear(input, weight, bias);
}

// ---- embedding --------------------------------------------------------------------------------

namespace {

bool fused_cpu(const Tensor& t) { return t.device().is_cpu() && (t.dtype() == kFloat32 || t.dtype() == kFloat64); }

// Indices as int64 on the host, checked against [0, num).
std::vector<int64_t> checked_embedding_indices(const Tensor& input, int64_t num) {
  EMBER_CHECK_T(TypeError, input.dtype() == kInt64 || input.dtype() == kInt32,
                "embedding: Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                "Long, Int; but got ", input.dtype(), " instead");
  std::vector<int64_t> idx = input.to_vector<int64_t>();
  for (int64_t v : idx) {
    EMBER_CHECK_T(IndexError, v >= 0 && v < num, "embedding: index out of range in self (index ", v,
                  ", num_embeddings ", num, ")");
  }
  return idx;
}

int64_t wrap_padding_idx(std::optional<int64_t> padding_idx, int64_t num) {
  if (!padding_idx) return -1;
  int64_t p = *padding_idx;
  EMBER_CHECK_T(ValueError, p < num && p >= -num, "embedding: Padding_idx must be within num_embeddings (got ", p,
                " for ", num, " embeddings)");
  return p < 0 ? p + num : p;
}

template <typename T>
void embedding_forward_kernel(const std::vector<int64_t>& idx, const T* w, T* out, int64_t dim) {
  const int64_t n = static_cast<int64_t>(idx.size());
  parallel_for(0, n, std::max<int64_t>(1, 16384 / std::max<int64_t>(dim, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      std::memcpy(out + i * dim, w + idx[static_cast<size_t>(i)] * dim, sizeof(T) * static_cast<size_t>(dim));
    }
  });
}

// Serial over indices in order, so the sum for a repeated index is the same on every run.
template <typename T>
void embedding_backward_kernel(const std::vector<int64_t>& idx, const T* g, T* gw, int64_t dim, int64_t pad) {
  for (size_t i = 0; i < idx.size(); ++i) {
    int64_t r = idx[i];
    if (r == pad) continue;
    T* dst = gw + r * dim;
    const T* src = g + static_cast<int64_t>(i) * dim;
    for (int64_t j = 0; j < dim; ++j) dst[j] += src[j];
  }
}

}  // namespace

Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx) {
  EMBER_CHECK_T(ValueError, weight.dim() == 2, "embedding: 'weight' must be 2-D, got shape ", weight.sizes());
  if (!fused_cpu(weight) || !input.device().is_cpu()) return detail::embedding_reference(input, weight, padding_idx);
  const int64_t num = weight.sizes()[0], dim = weight.sizes()[1];
  const int64_t pad = wrap_padding_idx(padding_idx, num);
  auto idx = std::make_shared<std::vector<int64_t>>(checked_embedding_indices(input, num));
  IntList out_sizes = input.sizes();
  out_sizes.push_back(dim);
  Tensor w = native::contiguous(weight);
  Tensor out = empty(out_sizes, TensorOptions(weight.dtype()).device(weight.device()));
  if (weight.dtype() == kFloat32) {
    embedding_forward_kernel(*idx, w.data_ptr<float>(), out.data_ptr<float>(), dim);
  } else {
    embedding_forward_kernel(*idx, w.data_ptr<double>(), out.data_ptr<double>(), dim);
  }
  autograd::record("EmbeddingBackward0", {&weight}, {&out},
                   [idx, num, dim, pad, dt = weight.dtype(), dev = weight.device()](FunctionNode&, TensorList& g) {
                     Tensor gc = native::contiguous(g[0]);
                     if (gc.dtype() != dt) gc = native::to(gc, dt);
                     Tensor gw = zeros({num, dim}, TensorOptions(dt).device(dev));
                     if (dt == kFloat32) {
                       embedding_backward_kernel(*idx, gc.data_ptr<float>(), gw.data_ptr<float>(), dim, pad);
                     } else {
                       embedding_backward_kernel(*idx, gc.data_ptr<double>(), gw.data_ptr<double>(), dim, pad);
                     }
                     return TensorList{gw};
                   });
  return out;
}

Tensor detail::embedding_reference(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx) {
  EMBER_CHECK_T(ValueError, weight.dim() == 2, "embedding: 'weight' must be 2-D, got shape ", weight.sizes());
  const int64_t num = weight.sizes()[0], dim = weight.sizes()[1];
  const int64_t pad = wrap_padding_idx(padding_idx, num);
  EMBER_CHECK_T(TypeError, input.dtype() == kInt64 || input.dtype() == kInt32,
                "embedding: Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                "Long, Int; but got ", input.dtype(), " instead");
  if (input.numel() > 0) {
    int64_t lo = static_cast<int64_t>(native::amin(input).item());
    int64_t hi = static_cast<int64_t>(native::amax(input).item());
    EMBER_CHECK_T(IndexError, lo >= 0 && hi < num, "embedding: index out of range in self (indices span [", lo, ", ",
                  hi, "], num_embeddings ", num, ")");
  }
  Tensor flat = native::reshape(input, {-1});
  Tensor w = weight;
  if (pad >= 0 && weight.requires_grad()) {
    // Route the padding row through a constant so it receives no gradient.
    Tensor keep = ones({num, 1}, TensorOptions(weight.dtype()).device(weight.device()));
    Tensor row = native::select(keep, 0, pad);
    native::zero_(row);
    Tensor frozen = native::mul(weight, native::rsub(keep, 1.0));  // padding row only, constant
    w = ember::add(ember::mul(weight, keep), frozen);
  }
  IntList out_sizes = input.sizes();
  out_sizes.push_back(dim);
  return ember::reshape(ember::index_select(w, 0, flat), out_sizes);
}

// ---- dropout --------------------------------------------------------------------------------------

Tensor dropout(const Tensor& input, double p, bool training, Generator* gen) {
  EMBER_CHECK_T(ValueError, p >= 0.0 && p <= 1.0, "dropout probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0.0) return input;
  if (p == 1.0) return ember::mul(input, zeros_like(input));
  Tensor mask = bernoulli(input.sizes(), 1.0 - p, TensorOptions(input.dtype()).device(input.device()), gen);
  native::mul_(mask, 1.0 / (1.0 - p));
  return ember::mul(input, mask);
}

// ---- layer_norm ----------------------------------------------------------------------------------

namespace {

constexpr int64_t kLayerNormBlockRows = 64;  // fixed partition: weight/bias gradients are thread-count independent

template <typename T>
void layer_norm_forward_kernel(const T* x, const T* w, const T* b, T* y, double* mean, double* rstd, int64_t M,
                               int64_t N, double eps) {
  parallel_for(0, M, std::max<int64_t>(1, 8192 / std::max<int64_t>(N, 1)), [&](int64_t rb, int64_t re) {
    for (int64_t i = rb; i < re; ++i) {
      const T* xi = x + i * N;
      double s = 0.0;
      for (int64_t j = 0; j < N; ++j) s += static_cast<double>(xi[j]);
      double mu = s / static_cast<double>(N);
      double v = 0.0;
      for (int64_t j = 0; j < N; ++j) {
        double d = static_cast<double>(xi[j]) - mu;
        v += d * d;
      }
      double r = 1.0 / std::sqrt(v / static_cast<double>(N) + eps);
      mean[i] = mu;
      rstd[i] = r;
      T* yi = y + i * N;
      for (int64_t j = 0; j < N; ++j) {
        double h = (static_cast<double>(xi[j]) - mu) * r;
        if (w) h *= static_cast<double>(w[j]);
        if (b) h += static_cast<double>(b[j]);
        yi[j] = static_cast<T>(h);
      }
    }
  });
}

template <typename T>
void layer_norm_backward_kernel(const T* g, const T* x, const T* w, const double* mean, const double* rstd, int64_t M,
                                int64_t N, T* gx, T* gw, T* gb) {
  const int64_t nblocks = (M + kLayerNormBlockRows - 1) / kLayerNormBlockRows;
  const bool need_wb = gw || gb;
  std::vector<double> pw(need_wb ? static_cast<size_t>(nblocks * N) : 0), pb(pw.size());
  parallel_for(0, nblocks, 1, [&](int64_t bb, int64_t be) {
    for (int64_t blk = bb; blk < be; ++blk) {
      double* bw = need_wb ? &pw[static_cast<size_t>(blk * N)] : nullptr;
      double* bbias = need_wb ? &pb[static_cast<size_t>(blk * N)] : nullptr;
      const int64_t r0 = blk * kLayerNormBlockRows, r1 = std::min(M, r0 + kLayerNormBlockRows);
      for (int64_t i = r0; i < r1; ++i) {
        const T* gi = g + i * N;
        const T* xi = x + i * N;
        const double mu = mean[i], r = rstd[i];
        if (need_wb) {
          for (int64_t j = 0; j < N; ++j) {
            double gj = static_cast<double>(gi[j]);
            bw[j] += gj * (static_cast<double>(xi[j]) - mu) * r;
            bbias[j] += gj;
          }
        }
        if (!gx) continue;
        double a = 0.0, c = 0.0;
        for (int64_t j = 0; j < N; ++j) {
          double gj = static_cast<double>(gi[j]) * (w ? static_cast<double>(w[j]) : 1.0);
          a += gj;
          c += gj * (static_cast<double>(xi[j]) - mu) * r;
        }
        a /= static_cast<double>(N);
        c /= static_cast<double>(N);
        T* gxi = gx + i * N;
        for (int64_t j = 0; j < N; ++j) {
          double gj = static_cast<double>(gi[j]) * (w ? static_cast<double>(w[j]) : 1.0);
          double h = (static_cast<double>(xi[j]) - mu) * r;
          gxi[j] = static_cast<T>(r * (gj - a - h * c));
        }
      }
    }
  });
  if (!need_wb) return;
  for (int64_t j = 0; j < N; ++j) {
    double sw = 0.0, sb = 0.0;
    for (int64_t blk = 0; blk < nblocks; ++blk) {
      sw += pw[static_cast<size_t>(blk * N + j)];
      sb += pb[static_cast<size_t>(blk * N + j)];
    }
    if (gw) gw[j] = static_cast<T>(sw);
    if (gb) gb[j] = static_cast<T>(sb);
  }
}

// Returns (M, N) and validates shapes as PyTorch's layer_norm does.
std::pair<int64_t, int64_t> layer_norm_dims(const Tensor& input, const IntList& normalized_shape,
                                            const Tensor& weight, const Tensor& bias) {
  const int64_t nd = static_cast<int64_t>(normalized_shape.size());
  EMBER_CHECK_T(ValueError, nd >= 1, "layer_norm: Expected normalized_shape to be at least 1-dimensional, i.e., "
                "containing at least one element, but got normalized_shape = ", normalized_shape);
  EMBER_CHECK_T(ValueError, !weight.defined() || weight.sizes() == normalized_shape,
                "layer_norm: Expected weight to be of same shape as normalized_shape, but got weight of shape ",
                weight.sizes(), " and normalized_shape = ", normalized_shape);
  EMBER_CHECK_T(ValueError, !bias.defined() || bias.sizes() == normalized_shape,
                "layer_norm: Expected bias to be of same shape as normalized_shape, but got bias of shape ",
                bias.sizes(), " and normalized_shape = ", normalized_shape);
  bool ok = input.dim() >= nd;
  for (int64_t i = 0; ok && i < nd; ++i) {
    ok = input.sizes()[static_cast<size_t>(input.dim() - nd + i)] == normalized_shape[static_cast<size_t>(i)];
  }
  if (!ok) {
    std::ostringstream os;
    os << "[*";
    for (auto s : normalized_shape) os << ", " << s;
    os << "]";
    EMBER_THROW(ValueError, "layer_norm: Given normalized_shape=", normalized_shape,
                ", expected input with shape ", os.str(), ", but got input of size", input.sizes());
  }
  int64_t N = numel_of(normalized_shape);
  int64_t M = N == 0 ? 0 : input.numel() / N;
  return {M, N};
}

}  // namespace

Tensor layer_norm(const Tensor& input, const IntList& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  auto [M, N] = layer_norm_dims(input, normalized_shape, weight, bias);
  const DType dt = input.dtype();
  bool fused = fused_cpu(input) && (!weight.defined() || (weight.device().is_cpu() && weight.dtype() == dt)) &&
               (!bias.defined() || (bias.device().is_cpu() && bias.dtype() == dt)) && N > 0;
  if (!fused) return detail::layer_norm_reference(input, normalized_shape, weight, bias, eps);
  Tensor x = native::contiguous(input);
  Tensor w = weight.defined() ? native::contiguous(weight) : Tensor();
  Tensor b = bias.defined() ? native::contiguous(bias) : Tensor();
  Tensor y = empty(input.sizes(), TensorOptions(dt).device(input.device()));
  Tensor mean = empty({M}, TensorOptions(kFloat64).device(input.device())),
         rstd = empty({M}, TensorOptions(kFloat64).device(input.device()));
  auto run = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    layer_norm_forward_kernel<T>(x.data_ptr<T>(), w.defined() ? w.data_ptr<T>() : nullptr,
                                 b.defined() ? b.data_ptr<T>() : nullptr, y.data_ptr<T>(), mean.data_ptr<double>(),
                                 rstd.data_ptr<double>(), M, N, eps);
  };
  if (dt == kFloat32) {
    run(static_cast<float*>(nullptr));
  } else {
    run(static_cast<double*>(nullptr));
  }
  if (autograd::any_requires_grad({&input, &weight, &bias})) {
    SavedVariable sx(x), sw(w);
    autograd::record("NativeLayerNormBackward0", {&input, &weight, &bias}, {&y},
                     [sx, sw, mean, rstd, M = M, N = N, dt, sizes = input.sizes(), wsizes = normalized_shape, dev = input.device()](
                         FunctionNode& n, TensorList& g) {
                       Tensor xv = sx.unpack("NativeLayerNormBackward0");
                       Tensor wv = sw.defined() ? sw.unpack("NativeLayerNormBackward0") : Tensor();
                       Tensor gc = native::contiguous(g[0]);
                       if (gc.dtype() != dt) gc = native::to(gc, dt);
                       TensorList r(3);
                       if (n.needs_input_grad(0)) r[0] = empty(sizes, TensorOptions(dt).device(dev));
                       if (n.needs_input_grad(1)) r[1] = empty(wsizes, TensorOptions(dt).device(dev));
                       if (n.needs_input_grad(2)) r[2] = empty(wsizes, TensorOptions(dt).device(dev));
                       auto run_b = [&](auto* tag) {
                         using T = std::remove_pointer_t<decltype(tag)>;
                         layer_norm_backward_kernel<T>(
                             gc.data_ptr<T>(), xv.data_ptr<T>(), wv.defined() ? wv.data_ptr<T>() : nullptr,
                             mean.data_ptr<double>(), rstd.data_ptr<double>(), M, N,
                             r[0].defined() ? r[0].data_ptr<T>() : nullptr,
                             r[1].defined() ? r[1].data_ptr<T>() : nullptr,
                             r[2].defined() ? r[2].data_ptr<T>() : nullptr);
                       };
                       if (dt == kFloat32) {
                         run_b(static_cast<float*>(nullptr));
                       } else {
                         run_b(static_cast<double*>(nullptr));
                       }
                       return r;
                     });
  }
  return y;
}

Tensor detail::layer_norm_reference(const Tensor& input, const IntList& normalized_shape, const Tensor& weight,
                                    const Tensor& bias, double eps) {
  layer_norm_dims(input, normalized_shape, weight, bias);
  IntList dims;
  for (int64_t i = 0; i < static_cast<int64_t>(normalized_shape.size()); ++i) dims.push_back(input.dim() - 1 - i);
  Tensor mu = ember::mean(input, dims, true);
  Tensor xc = ember::sub(input, mu);
  Tensor v = ember::mean(ember::mul(xc, xc), dims, true);
  Tensor y = ember::mul(xc, ember::rsqrt(ember::add(v, eps)));
  if (weight.defined()) y = ember::mul(y, weight);
  if (bias.defined()) y = ember::add(y, bias);
  return y;
}

// ---- activations ----------------------------------------------------------------------------------

Tensor relu(const Tensor& input) { return ember::relu(input); }
Tensor tanh(const Tensor& input) { return ember::tanh(input); }
Tensor sigmoid(const Tensor& input) { return ember::sigmoid(input); }

Tensor gelu(const Tensor& input, const std::string& approximate) {
  if (approximate == "none") return ember::gelu(input);
  EMBER_CHECK_T(ValueError, approximate == "tanh", "gelu: approximate argument must be either none or tanh, got '",
                approximate, "'");
  // 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
  const double k = std::sqrt(2.0 / std::numbers::pi);
  Tensor inner = ember::mul(ember::add(input, ember::mul(ember::pow(input, 3.0), 0.044715)), k);
  return ember::mul(ember::mul(input, 0.5), ember::add(ember::tanh(inner), 1.0));
}

}  // namespace ember::nn::functional
