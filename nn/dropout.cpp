#include "nn/dropout.h"

#include "nn/functional.h"

namespace ember::nn {

DropoutImpl::DropoutImpl(double p) : Cloneable("Dropout"), p_(p) {
  EMBER_CHECK_T(ValueError, p >= 0.0 && p <= 1.0, "dropout probability has to be between 0 and 1, but got ", p);
  reset();
}

Tensor DropoutImpl::forward(const Tensor& input) { return F::dropout(input, p_, is_training(), gen_); }

void DropoutImpl::pretty_print(std::ostream& os) const { os << "Dropout(p=" << p_ << ", inplace=False)"; }

}  // namespace ember::nn
