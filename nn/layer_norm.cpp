#include "nn/layer_norm.h"

#include <cstdio>

#include "nn/functional.h"
#include "nn/init.h"

namespace ember::nn {

LayerNormImpl::LayerNormImpl(IntList normalized_shape, double eps, bool elementwise_affine)
    : Cloneable("LayerNorm"), normalized_shape_(std::move(normalized_shape)), eps_(eps),
      elementwise_affine_(elementwise_affine) {
  EMBER_CHECK_T(ValueError, !normalized_shape_.empty(), "LayerNorm: normalized_shape must have at least one dimension");
  reset();
}

void LayerNormImpl::reset() {
  weight = register_parameter("weight", elementwise_affine_ ? empty(normalized_shape_) : Tensor());
  bias = register_parameter("bias", elementwise_affine_ ? empty(normalized_shape_) : Tensor());
  reset_parameters();
}

void LayerNormImpl::reset_parameters() {
  if (!elementwise_affine_) return;
  init::ones_(weight);
  init::zeros_(bias);
}

Tensor LayerNormImpl::forward(const Tensor& input) { return F::layer_norm(input, normalized_shape_, weight, bias, eps_); }

void LayerNormImpl::pretty_print(std::ostream& os) const {
  // Python prints a shape tuple "(4,)" and eps with repr, e.g. 1e-05.
  os << "LayerNorm((";
  for (size_t i = 0; i < normalized_shape_.size(); ++i) os << (i ? ", " : "") << normalized_shape_[i];
  if (normalized_shape_.size() == 1) os << ",";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", eps_);
  std::string e = buf;
  // %g gives "1e-05" like Python's repr for small values; Python shows "0.001" likewise.
  os << "), eps=" << e << ", elementwise_affine=" << (elementwise_affine_ ? "True" : "False") << ")";
}

}  // namespace ember::nn
