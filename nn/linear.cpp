#include "nn/linear.h"

#include <cmath>

#include "nn/functional.h"
#include "nn/init.h"

namespace ember::nn {

LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, bool bias)
    : Cloneable("Linear"), in_features_(in_features), out_features_(out_features), has_bias_(bias) {
  EMBER_CHECK_T(ValueError, in_features >= 0 && out_features >= 0,
                "Linear: in_features and out_features must be non-negative, got ", in_features, " and ", out_features);
  reset();
}

void LinearImpl::reset() {
  weight = register_parameter("weight", empty({out_features_, in_features_}));
  bias = register_parameter("bias", has_bias_ ? empty({out_features_}) : Tensor());
  reset_parameters();
}

void LinearImpl::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    double bound = in_features_ > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features_)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor LinearImpl::forward(const Tensor& input) { return F::linear(input, weight, bias); }

void LinearImpl::pretty_print(std::ostream& os) const {
  os << "Linear(in_features=" << in_features_ << ", out_features=" << out_features_
     << ", bias=" << (bias.defined() ? "True" : "False") << ")";
}

}  // namespace ember::nn
