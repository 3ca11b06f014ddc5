// Layer functions of nn::functional: linear, embedding, dropout, layer_norm, activations, with
// PyTorch's checks; the fused ones record their nodes in autograd/functions/nn_layers.cpp.
// Losses are in functional_loss.cpp.
#include <cmath>
#include <cstring>
#include <numbers>
#include <sstream>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/functions/nn_layers.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "nn/functional.h"

namespace ember::nn::functional {

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

int64_t wrap_padding_idx(std::optional<int64_t> padding_idx, int64_t num) {
  if (!padding_idx) return -1;
  int64_t p = *padding_idx;
  EMBER_CHECK_T(ValueError, p < num && p >= -num, "embedding: Padding_idx must be within num_embeddings (got ", p,
                " for ", num, " embeddings)");
  return p < 0 ? p + num : p;
}

}  // namespace

Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx) {
  EMBER_CHECK_T(ValueError, weight.dim() == 2, "embedding: 'weight' must be 2-D, got shape ", weight.sizes());
  const int64_t num = weight.sizes()[0];
  return autograd::functions::embedding(input, weight, wrap_padding_idx(padding_idx, num));
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

Tensor layer_norm(const Tensor& input0, const IntList& normalized_shape, const Tensor& weight0, const Tensor& bias0,
                  double eps) {
  // On autocast's float32 list: see Note [Autocast op lists].
  const Tensor input = autograd::autocast_to_float32(input0), weight = autograd::autocast_to_float32(weight0),
               bias = autograd::autocast_to_float32(bias0);
  const auto [M, N] = layer_norm_dims(input, normalized_shape, weight, bias);
  return autograd::functions::layer_norm(input, M, N, weight, bias, eps);
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
