// The differentiable cumsum (autograd/ops.h): the running sum's gradient is the running sum of
// the output gradient taken from the other end.
#include "autograd/functions/detail.h"

namespace ember {

Tensor cumsum(const Tensor& a, int64_t dim) {
  Tensor out = native::cumsum(a, dim);
  autograd::record("CumsumBackward0", {&a}, {&out}, [dim](autograd::FunctionNode&, autograd::TensorList& g) {
    return autograd::TensorList{native::cumsum(g[0], dim, /*reverse=*/true)};
  });
  return out;
}

}  // namespace ember
