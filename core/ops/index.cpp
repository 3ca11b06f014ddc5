// Indexing ops: index_select, gather, scatter_add, index_add_, one_hot: checks, output
// allocation and the stubs of core/ops/index_stubs.h. Every index is bounds checked by a check
// kernel before anything is written, so a bad index leaves the destination unchanged and the
// IndexError names the first bad one by position (never a device assert).
#include "core/ops/index_stubs.h"

#include "core/ops/detail/index_geometry.h"
#include "core/ops/detail/plan.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember::native {

detail::DispatchStub<IndexFirstOutOfRangeFn> index_first_out_of_range_stub;
detail::DispatchStub<IndexGatherFn> index_gather_stub;
detail::DispatchStub<IndexScatterAddFn> index_scatter_add_stub;
detail::DispatchStub<OneHotFn> one_hot_stub;

namespace {

void check_index_tensor(const char* op, const Tensor& index) {
  EMBER_CHECK_T(TypeError, index.dtype() == kInt64 || index.dtype() == kInt32, op,
                ": expected index to be an int64 (Long) or int32 tensor, got ", index.dtype());
}

// The first entry of idx (contiguous int64) outside [-size, size) (or [0, size)), found by the
// check kernel: -1 when there is none; *value is that entry.
int64_t first_bad_index(const char* op, const Tensor& idx, int64_t size, bool allow_negative, int64_t* value) {
  Tensor slot = empty({1}, TensorOptions(kInt64).device(idx.device()));
  const int64_t bad = index_first_out_of_range_stub.kernel(idx.device(), op)(
      idx.data_ptr<int64_t>(), idx.numel(), size, allow_negative, slot.raw_data(), idx.device().index);
  if (bad >= 0) *value = select(reshape(idx, {-1}), 0, bad).item<int64_t>();
  return bad;
}

// A contiguous int64 copy of the index whose entries are all in [-size, size) (the kernels wrap
// negative ones); IndexError naming the first bad entry otherwise.
Tensor checked_indices(const char* op, const Tensor& index, int64_t size, int64_t dim) {
  Tensor idx = contiguous(to(index, kInt64));
  int64_t v = 0;
  if (first_bad_index(op, idx, size, /*allow_negative=*/true, &v) >= 0) {
    EMBER_THROW(IndexError, op, ": index ", v, " is out of bounds for dimension ", dim, " with size ", size);
  }
  return idx;
}

}  // namespace

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  check_index_tensor("index_select", index);
  detail::check_same_device("index_select", {&a, &index});
  EMBER_CHECK_T(IndexError, index.dim() <= 1, "index_select: index_select(): Index is supposed to be a vector, got shape ",
                index.sizes());
  int64_t nd = std::max<int64_t>(a.dim(), 1);
  Tensor src = a.dim() == 0 ? reshape(a, {1}) : a;
  dim = wrap_dim(dim, nd, "index_select");
  Tensor idx = checked_indices("index_select", index, src.sizes()[dim], dim);
  IntList out_sizes = src.sizes();
  out_sizes[dim] = idx.numel();
  Tensor out = empty(out_sizes, TensorOptions(a.dtype()).device(a.device()));
  const auto g = detail::index_select_geometry(src, dim, idx.numel());
  index_gather_stub.kernel(a.device(), "index_select")(a.dtype(), g, idx.data_ptr<int64_t>(), src.raw_data(),
                                                       out.raw_data(), a.device().index);
  return a.dim() == 0 ? reshape(out, {}) : out;
}

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  check_index_tensor("gather", index);
  detail::check_same_device("gather", {&a, &index});
  EMBER_CHECK_T(ValueError, index.dim() == a.dim(), "gather: Index tensor must have the same number of dimensions as input tensor (",
                index.dim(), " vs ", a.dim(), ")");
  dim = wrap_dim(dim, a.dim(), "gather");
  for (int64_t d = 0; d < a.dim(); ++d) {
    EMBER_CHECK_T(ValueError, d == dim || index.sizes()[d] <= a.sizes()[d], "gather: Size does not match at dimension ", d,
                  " expected index ", index.sizes(), " to be smaller than self ", a.sizes(), " apart from dimension ", dim);
  }
  const int64_t size = a.dim() ? a.sizes()[dim] : 1;
  Tensor idx = checked_indices("gather", index, size, dim);
  Tensor out = empty(index.sizes(), TensorOptions(a.dtype()).device(a.device()));
  const auto g = detail::gather_geometry(a, dim, index.sizes());
  index_gather_stub.kernel(a.device(), "gather")(a.dtype(), g, idx.data_ptr<int64_t>(), a.raw_data(), out.raw_data(),
                                                 a.device().index);
  return out;
}

Tensor& scatter_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  check_index_tensor("scatter_add_", index);
  detail::check_same_device("scatter_add_", {&self, &index, &src});
  EMBER_CHECK_T(TypeError, self.dtype() == src.dtype(), "scatter_add_: expected self and src to have the same dtype, got ",
                self.dtype(), " and ", src.dtype());
  EMBER_CHECK_T(ValueError, index.dim() == self.dim() && src.dim() == self.dim(),
                "scatter_add_: Index tensor must have the same number of dimensions as self and src tensors");
  dim = wrap_dim(dim, self.dim(), "scatter_add_");
  for (int64_t d = 0; d < self.dim(); ++d) {
    EMBER_CHECK_T(ValueError, index.sizes()[d] <= src.sizes()[d] && (d == dim || index.sizes()[d] <= self.sizes()[d]),
                  "scatter_add_: Expected index ", index.sizes(), " to be smaller than self ", self.sizes(),
                  " apart from dimension ", dim, " and to be smaller size than src ", src.sizes());
  }
  const int64_t size = self.dim() ? self.sizes()[dim] : 1;
  Tensor idx = checked_indices("scatter_add_", index, size, dim);
  const auto g = detail::scatter_add_geometry(self, dim, index.sizes(), src);
  index_scatter_add_stub.kernel(self.device(), "scatter_add_")(self.dtype(), g, idx.data_ptr<int64_t>(),
                                                               src.raw_data(), self.raw_data(), "scatter_add_",
                                                               self.device().index);
  self.bump_version();
  return self;
}

Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = clone(a);
  return scatter_add_(out, dim, index, src);
}

Tensor& index_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  check_index_tensor("index_add_", index);
  detail::check_same_device("index_add_", {&self, &index, &src});
  EMBER_CHECK_T(TypeError, self.dtype() == src.dtype(), "index_add_: self (", self.dtype(), ") and source (", src.dtype(),
                ") must have the same scalar type");
  EMBER_CHECK_T(IndexError, index.dim() <= 1, "index_add_: Index is supposed to be a vector");
  if (self.dim() == 0) {  // as a 1-element vector (a view, so the writes land in self)
    wrap_dim(dim, 0, "index_add_");
    Tensor self1 = reshape(self, {1});
    index_add_(self1, 0, index, src.dim() == 0 ? reshape(src, {1}) : src);
    return self;
  }
  dim = wrap_dim(dim, self.dim(), "index_add_");
  Tensor idx = checked_indices("index_add_", index, self.sizes()[dim], dim);
  IntList expect = self.sizes();
  expect[dim] = idx.numel();
  EMBER_CHECK_T(ValueError, src.sizes() == expect, "index_add_: source of shape ", src.sizes(), " must have shape ",
                expect, " (self ", self.sizes(), " with dimension ", dim, " replaced by the index length)");
  const auto g = detail::index_add_geometry(self, dim, src);
  index_scatter_add_stub.kernel(self.device(), "index_add_")(self.dtype(), g, idx.data_ptr<int64_t>(), src.raw_data(),
                                                             self.raw_data(), "index_add_", self.device().index);
  self.bump_version();
  return self;
}

Tensor one_hot(const Tensor& index, int64_t num_classes) {
  EMBER_CHECK_T(TypeError, index.dtype() == kInt64, "one_hot: one_hot is only applicable to index tensor of type int64, got ",
                index.dtype());
  Tensor idx = contiguous(index);
  if (num_classes < 0) num_classes = idx.numel() == 0 ? 0 : std::max<int64_t>(0, amax(idx).item<int64_t>() + 1);
  int64_t v = 0;
  if (first_bad_index("one_hot", idx, num_classes, /*allow_negative=*/false, &v) >= 0) {
    EMBER_THROW(IndexError, "one_hot: class values must be in [0, ", num_classes, "), got ", v);
  }
  IntList s = index.sizes();
  s.push_back(num_classes);
  Tensor out = zeros(s, TensorOptions(kInt64).device(index.device()));
  one_hot_stub.kernel(index.device(), "one_hot")(idx.data_ptr<int64_t>(), idx.numel(), num_classes,
                                                 out.data_ptr<int64_t>(), idx.device().index);
  return out;
}

}  // namespace ember::native
