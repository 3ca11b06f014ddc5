// The gather/scatter geometry (kernels::IndexGeometry, core/kernels/index.h) of each indexing
// op, built from its tensors. Shared by core/ops/index.cpp (every device) and the CPU grid-emulation
// tests, so the tests run exactly the geometry the op launches. `dim` is already wrapped.
#pragma once
#include "core/kernels/index.h"
#include "core/tensor.h"

namespace ember::native::detail {

/// Iteration `sizes`, element strides of the plain and the indexed side. Throws Error beyond
/// kMaxDims dimensions.
inline kernels::IndexGeometry index_geometry(const char* op, const IntList& sizes, const IntList& plain,
                                             const IntList& indexed, int64_t dim, bool per_element, int64_t dim_size) {
  EMBER_CHECK(static_cast<int>(sizes.size()) <= kernels::kMaxDims, op, ": at most ", kernels::kMaxDims,
              " dimensions are supported, got ", sizes.size());
  kernels::IndexGeometry g;
  g.ndim = static_cast<int>(sizes.size());
  g.dim = static_cast<int>(dim);
  g.index_per_element = per_element;
  g.dim_size = dim_size;
  for (int d = 0; d < g.ndim; ++d) {
    g.sizes[d] = sizes[d];
    g.plain[d] = plain[d];
    g.indexed[d] = indexed[d];
  }
  return g;
}

/// index_select(src, dim, index of length n) into a contiguous output (src has >= 1 dims).
inline kernels::IndexGeometry index_select_geometry(const Tensor& src, int64_t dim, int64_t n) {
  IntList out_sizes = src.sizes();
  out_sizes[dim] = n;
  return index_geometry("index_select", out_sizes, contiguous_strides(out_sizes), src.strides(), dim,
                        /*per_element=*/false, src.sizes()[dim]);
}

/// gather(a, dim, index) into a contiguous output of the index's shape.
inline kernels::IndexGeometry gather_geometry(const Tensor& a, int64_t dim, const IntList& index_sizes) {
  return index_geometry("gather", index_sizes, contiguous_strides(index_sizes), a.strides(), dim,
                        /*per_element=*/true, a.dim() ? a.sizes()[dim] : 1);
}

/// self.scatter_add_(dim, index, src).
inline kernels::IndexGeometry scatter_add_geometry(const Tensor& self, int64_t dim, const IntList& index_sizes,
                                                   const Tensor& src) {
  return index_geometry("scatter_add_", index_sizes, src.strides(), self.strides(), dim, /*per_element=*/true,
                        self.dim() ? self.sizes()[dim] : 1);
}

/// self.index_add_(dim, index, src) (self has >= 1 dims).
inline kernels::IndexGeometry index_add_geometry(const Tensor& self, int64_t dim, const Tensor& src) {
  return index_geometry("index_add_", src.sizes(), src.strides(), self.strides(), dim, /*per_element=*/false,
                        self.sizes()[dim]);
}

}  // namespace ember::native::detail
