// softmax / log_softmax along a dim and their backward: checks, output allocation, dispatch
// through the stubs of core/ops/softmax_stubs.h.
#include "core/ops/softmax_stubs.h"

#include "core/ops/detail/plan.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember::native {

detail::DispatchStub<SoftmaxFn> softmax_stub;
detail::DispatchStub<SoftmaxBackwardFn> softmax_backward_stub;

namespace {

// The [outer, n, inner] view around `dim` of a float32 or float64 tensor; IndexError for a bad
// dim, TypeError for another dtype.
struct Lines {
  int64_t outer = 1, n = 1, inner = 1;
};
Lines softmax_lines(const Tensor& x, int64_t dim, const char* name) {
  dim = wrap_dim(dim, x.dim(), name);
  EMBER_CHECK_T(TypeError, x.dtype() == kFloat32 || x.dtype() == kFloat64, name,
                ": expected a floating-point dtype (float32 or float64), got ", x.dtype());
  const IntList& sizes = x.sizes();
  Lines l;
  for (int64_t d = 0; d < dim; ++d) l.outer *= sizes[static_cast<size_t>(d)];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(sizes.size()); ++d) l.inner *= sizes[static_cast<size_t>(d)];
  l.n = sizes.empty() ? 1 : sizes[static_cast<size_t>(dim)];
  return l;
}

Tensor softmax_impl(const Tensor& a, int64_t dim, bool log, const char* name) {
  Tensor x = contiguous(a.is_floating_point() ? a : to(a, kFloat32));
  const Lines l = softmax_lines(x, dim, name);
  Tensor out = empty(x.sizes(), TensorOptions(x.dtype()).device(x.device()));
  if (x.numel() > 0) {
    softmax_stub.kernel(x.device(), name)(x.dtype(), l.outer, l.n, l.inner, log, x.raw_data(), out.raw_data(),
                                          x.device().index);
  }
  return out;
}

Tensor softmax_backward_impl(const Tensor& grad, const Tensor& out, int64_t dim, bool log, const char* name) {
  EMBER_CHECK_T(ValueError, grad.sizes() == out.sizes(), name, ": grad shape ", grad.sizes(), " != output shape ", out.sizes());
  detail::check_same_device(name, {&grad, &out});
  Tensor g = contiguous(to(grad, out.dtype())), y = contiguous(out);
  const Lines l = softmax_lines(y, dim, name);
  Tensor gi = empty(y.sizes(), TensorOptions(y.dtype()).device(y.device()));
  if (y.numel() > 0) {
    softmax_backward_stub.kernel(y.device(), name)(y.dtype(), l.outer, l.n, l.inner, log, g.raw_data(),
                                                   y.raw_data(), gi.raw_data(), y.device().index);
  }
  return gi;
}

}  // namespace

Tensor softmax(const Tensor& a, int64_t dim) { return softmax_impl(a, dim, false, "softmax"); }
Tensor log_softmax(const Tensor& a, int64_t dim) { return softmax_impl(a, dim, true, "log_softmax"); }
Tensor softmax_backward(const Tensor& g, const Tensor& out, int64_t dim) {
  return softmax_backward_impl(g, out, dim, false, "softmax_backward");
}
Tensor log_softmax_backward(const Tensor& g, const Tensor& out, int64_t dim) {
  return softmax_backward_impl(g, out, dim, true, "log_softmax_backward");
}

}  // namespace ember::native
