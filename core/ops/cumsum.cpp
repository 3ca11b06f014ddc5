// cumsum (core/ops/native.h): checks, the result dtype (PyTorch's: integers and bool sum into
// int64), allocation, and cumsum_stub (core/ops/cumsum_stubs.h).
#include "core/ops/cumsum_stubs.h"

#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember::native {

detail::DispatchStub<CumsumFn> cumsum_stub;

Tensor cumsum(const Tensor& a, int64_t dim, bool reverse) {
  const int64_t nd = std::max<int64_t>(a.dim(), 1);
  dim = wrap_dim(dim, nd, "cumsum");
  const DType dtype = is_floating_point(a.dtype()) ? a.dtype() : kInt64;
  EMBER_CHECK_T(TypeError, dtype == kFloat32 || dtype == kFloat64 || dtype == kInt64,
                "cumsum: expected a float32, float64, integer or bool tensor, got ", a.dtype());
  Tensor x = contiguous(a.dtype() == dtype ? a : to(a, dtype));
  Tensor out = empty(a.sizes(), TensorOptions(dtype).device(a.device()));
  if (out.numel() == 0) return out;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= a.size(d);
  for (int64_t d = dim + 1; d < a.dim(); ++d) inner *= a.size(d);
  const int64_t n = a.dim() == 0 ? 1 : a.size(dim);
  cumsum_stub.kernel(a.device(), "cumsum")(dtype, outer, n, inner, reverse, x.raw_data(), out.raw_data(),
                                           a.device().index);
  return out;
}

}  // namespace ember::native
