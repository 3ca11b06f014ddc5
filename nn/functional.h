// nn::functional (alias F): the differentiable layer and loss functions behind the modules,
// with PyTorch's semantics, defaults and error texts (torch.nn.functional). Losses over class
// indices, layer_norm and embedding have fused CPU kernels for float32/float64 (forward and
// backward in one node each); other devices and dtypes take the composite path built from
// autograd ops, which is also the reference the fused kernels are tested against. Stateless
// and thread-safe (dropout draws from the generator it is given, which locks).
#pragma once
#include <optional>
#include <string>

#include "autograd/functions/class_loss.h"
#include "autograd/ops.h"
#include "core/generator.h"
#include "core/tensor.h"

namespace ember::nn::functional {

/// How a loss reduces its per-element values (PyTorch's reduction='none' | 'mean' | 'sum').
using Reduction = autograd::functions::Reduction;
/// "none", "mean" or "sum"; throws ValueError otherwise.
Reduction reduction_from_string(const std::string& s);
const char* reduction_name(Reduction r);

/// x @ weight^T + bias (weight [out, in], bias [out] or undefined).
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor());

/// Rows of weight [num_embeddings, dim] picked by integer `input` of any shape -> [*input, dim].
/// The row at padding_idx (negative counts from the end) receives no gradient. Throws
/// IndexError for an index outside [0, num_embeddings).
Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx = std::nullopt);

/// Zeroes elements with probability p while training and scales the rest by 1 / (1 - p); the
/// identity when !training or p == 0. Throws ValueError unless 0 <= p <= 1.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true, Generator* gen = nullptr);

/// Normalizes over the trailing dims `normalized_shape` (biased variance), then
/// * weight + bias when given (both of shape normalized_shape).
Tensor layer_norm(const Tensor& input, const IntList& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

Tensor relu(const Tensor& input);
Tensor tanh(const Tensor& input);
Tensor sigmoid(const Tensor& input);
/// approximate: "none" (erf form) or "tanh".
Tensor gelu(const Tensor& input, const std::string& approximate = "none");

// ---- losses ---------------------------------------------------------------------------------

struct CrossEntropyOptions {
  Tensor weight = Tensor();    // [C] rescaling per class, or undefined
  int64_t ignore_index = -100; // targets equal to it contribute nothing (class-index targets)
  Reduction reduction = Reduction::Mean;
  double label_smoothing = 0.0;  // in [0, 1]
};

/// input [N, C] or [N, C, d1, ...] (or unbatched [C]) logits; target int64 class indices of shape
/// [N] / [N, d1, ...] (or []), or class probabilities of input's shape and dtype. Mean reduction
/// over class indices is the weighted mean over non-ignored targets: sum(w[t] * l) / sum(w[t])
/// (NaN when every target is ignored). Errors as PyTorch's: batch size and target shape
/// mismatches (ValueError), a target outside [0, C) that is not ignore_index (IndexError).
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options = {});

struct NLLLossOptions {
  Tensor weight = Tensor();
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
};
/// input: log-probabilities with the layout of cross_entropy's; target class indices.
Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& options = {});

/// (input - target)^2, broadcasting as PyTorch does (which warns when shapes differ; we do not).
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

struct BCEWithLogitsOptions {
  Tensor weight = Tensor();      // broadcast to input's shape, or undefined
  Tensor pos_weight = Tensor();  // broadcast over the last dim (per class), or undefined
  Reduction reduction = Reduction::Mean;
};
/// Sigmoid + binary cross-entropy in the log-sum-exp stable form:
///   l = (1 - t) * x + (1 + (pw - 1) * t) * (log1p(exp(-|x|)) + max(-x, 0)), times weight.
/// target must have input's shape (ValueError otherwise, in PyTorch's words).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BCEWithLogitsOptions& options = {});

namespace detail {
/// The composite (autograd-op) implementations; the fused CPU kernels are tested against them.
Tensor cross_entropy_reference(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options);
Tensor nll_loss_reference(const Tensor& input, const Tensor& target, const NLLLossOptions& options);
Tensor layer_norm_reference(const Tensor& input, const IntList& normalized_shape, const Tensor& weight,
                            const Tensor& bias, double eps);
Tensor embedding_reference(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx);
}  // namespace detail

}  // namespace ember::nn::functional

namespace ember::nn {
namespace F = functional;
}
