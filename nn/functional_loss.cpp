// Losses of nn::functional: cross_entropy, nll_loss, mse_loss, binary_cross_entropy_with_logits.
// The fused class-index path is autograd/functions/class_loss.cpp (Note [Class-index loss
// kernels] in core/ops/class_loss.cpp); the composite path, its reference, is here.
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "autograd/autocast.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "nn/functional.h"

namespace ember::nn::functional {

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
  // CPU devices share one address space; on CUDA input and target must be on one device.
  auto same = [&](Device d) { return d.is_cpu() ? input.device().is_cpu() : d == input.device(); };
  if (!same(target.device())) return false;
  if (input.dtype() != kFloat32 && input.dtype() != kFloat64) return false;
  if (weight.defined() && (!same(weight.device()) || weight.requires_grad())) return false;
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

Tensor cross_entropy(const Tensor& input0, const Tensor& target0, const CrossEntropyOptions& options0) {
  // The losses are on autocast's float32 list: see Note [Autocast op lists].
  const Tensor input = autograd::autocast_to_float32(input0), target = autograd::autocast_to_float32(target0);
  CrossEntropyOptions options = options0;
  options.weight = autograd::autocast_to_float32(options0.weight);
  check_label_smoothing(options.label_smoothing);
  if (is_probability_target(input, target)) return cross_entropy_probs(input, target, options);
  ClassLayout L = check_class_target(input, target, options.weight, "cross_entropy");
  if (!fused_ok(input, target, options.weight)) return detail::cross_entropy_reference(input, target, options);
  return autograd::functions::class_loss(input, target, options.weight, options.ignore_index, options.reduction,
                                         options.label_smoothing, /*from_logits=*/true, L.out_sizes);
}

Tensor nll_loss(const Tensor& input0, const Tensor& target, const NLLLossOptions& options0) {
  const Tensor input = autograd::autocast_to_float32(input0);
  NLLLossOptions options = options0;
  options.weight = autograd::autocast_to_float32(options0.weight);
  ClassLayout L = check_class_target(input, target, options.weight, "nll_loss");
  if (!fused_ok(input, target, options.weight)) return detail::nll_loss_reference(input, target, options);
  return autograd::functions::class_loss(input, target, options.weight, options.ignore_index, options.reduction, 0.0,
                                         /*from_logits=*/false, L.out_sizes);
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

Tensor mse_loss(const Tensor& input0, const Tensor& target0, Reduction reduction) {
  const Tensor input = autograd::autocast_to_float32(input0), target = autograd::autocast_to_float32(target0);
  Tensor d = ember::sub(input, target);
  return reduce_loss(ember::mul(d, d), reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input0, const Tensor& target0,
                                        const BCEWithLogitsOptions& o0) {
  const Tensor input = autograd::autocast_to_float32(input0), target = autograd::autocast_to_float32(target0);
  BCEWithLogitsOptions o = o0;
  o.weight = autograd::autocast_to_float32(o0.weight);
  o.pos_weight = autograd::autocast_to_float32(o0.pos_weight);
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
