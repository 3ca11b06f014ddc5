// softmax / log_softmax along a dim and their backward formulas (max-subtracted, in double
// accumulators for the sums).
#include <cmath>

#include "core/ops/detail/plan.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/thread_pool.h"

namespace ember::native {
namespace {

// Runs f(row_ptrs...) for every 1-D line along `dim` of contiguous tensors.
template <typename F>
void for_each_line(const IntList& sizes, int64_t dim, F f) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= sizes[d];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(sizes.size()); ++d) inner *= sizes[d];
  int64_t n = sizes.empty() ? 1 : sizes[dim];
  int64_t lines = outer * inner;
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t l = b; l < e; ++l) {
      int64_t o = l / inner, i = l % inner;
      f(o * n * inner + i, inner, n);
    }
  };
  if (lines * n < 32768) {
    body(0, lines);
  } else {
    parallel_for(0, lines, std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)), body);
  }
}

Tensor softmax_impl(const Tensor& a, int64_t dim, bool log, const char* name) {
  EMBER_CHECK(a.device().is_cpu(), name, ": CUDA is not supported by this op in this build");
  Tensor x = contiguous(a.is_floating_point() ? a : to(a, kFloat32));
  dim = wrap_dim(dim, x.dim(), name);
  Tensor out = empty(x.sizes(), TensorOptions(x.dtype()).device(x.device()));
  EMBER_DISPATCH_FLOATING(x.dtype(), name, [&] {
    const scalar_t* in = x.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    for_each_line(x.sizes(), dim, [&](int64_t base, int64_t stride, int64_t n) {
      scalar_t mx = -INFINITY;
      for (int64_t j = 0; j < n; ++j) mx = std::max(mx, in[base + j * stride]);
      if (std::isinf(mx) && mx < 0) mx = 0;
      double s = 0;
      for (int64_t j = 0; j < n; ++j) s += std::exp(static_cast<double>(in[base + j * stride] - mx));
      if (log) {
        scalar_t lse = static_cast<scalar_t>(std::log(s)) + mx;
        for (int64_t j = 0; j < n; ++j) o[base + j * stride] = in[base + j * stride] - lse;
      } else {
        double inv = 1.0 / s;
        for (int64_t j = 0; j < n; ++j)
          o[base + j * stride] = static_cast<scalar_t>(std::exp(static_cast<double>(in[base + j * stride] - mx)) * inv);
      }
    });
  });
  return out;
}

Tensor softmax_backward_impl(const Tensor& grad, const Tensor& out, int64_t dim, bool log, const char* name) {
  EMBER_CHECK_T(ValueError, grad.sizes() == out.sizes(), name, ": grad shape ", grad.sizes(), " != output shape ", out.sizes());
  Tensor g = contiguous(to(grad, out.dtype())), y = contiguous(out);
  dim = wrap_dim(dim, y.dim(), name);
  Tensor gi = empty(y.sizes(), TensorOptions(y.dtype()).device(y.device()));
  EMBER_DISPATCH_FLOATING(y.dtype(), name, [&] {
    const scalar_t* gp = g.data_ptr<scalar_t>();
    const scalar_t* yp = y.data_ptr<scalar_t>();
    scalar_t* o = gi.data_ptr<scalar_t>();
    for_each_line(y.sizes(), dim, [&](int64_t base, int64_t stride, int64_t n) {
      double s = 0;
      if (log) {
        for (int64_t j = 0; j < n; ++j) s += gp[base + j * stride];
        for (int64_t j = 0; j < n; ++j) {
          int64_t k = base + j * stride;
          o[k] = static_cast<scalar_t>(gp[k] - std::exp(static_cast<double>(yp[k])) * s);
        }
      } else {
        for (int64_t j = 0; j < n; ++j) s += static_cast<double>(gp[base + j * stride]) * yp[base + j * stride];
        for (int64_t j = 0; j < n; ++j) {
          int64_t k = base + j * stride;
          o[k] = static_cast<scalar_t>(yp[k] * (gp[k] - s));
        }
      }
    });
  });
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
