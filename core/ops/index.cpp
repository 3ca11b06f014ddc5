// Indexing ops: index_select, gather, scatter_add, index_add_, one_hot. Every index is bounds
// checked before anything is written, so a bad index leaves the destination unchanged; on CUDA by
// a check kernel before the launch (an IndexError naming the op, never a device assert), then
// the functors of core/kernels/index.h.
#include <cstring>

#include "core/deterministic.h"
#include "core/ops/detail/index_geometry.h"
#include "core/ops/detail/plan.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/thread_pool.h"

namespace ember::native {
namespace {

void check_index_tensor(const char* op, const Tensor& index) {
  EMBER_CHECK_T(TypeError, index.dtype() == kInt64 || index.dtype() == kInt32, op,
                ": expected index to be an int64 (Long) or int32 tensor, got ", index.dtype());
}

// Contiguous int64 copy of the index, with every entry checked against [0, size).
std::vector<int64_t> checked_indices(const char* op, const Tensor& index, int64_t size, int64_t dim) {
  Tensor idx = contiguous(to(index, kInt64));
  const int64_t* p = idx.data_ptr<int64_t>();
  std::vector<int64_t> out(p, p + idx.numel());
  for (auto& v : out) {
    EMBER_CHECK_T(IndexError, v >= -size && v < size, op, ": index ", v, " is out of bounds for dimension ", dim,
                  " with size ", size);
    if (v < 0) v += size;
  }
  return out;
}

// The first entry of idx (contiguous int64 on CUDA) outside [-size, size) (or [0, size)), found
// by a check kernel: -1 when there is none.
int64_t first_bad_index_cuda(const char* op, const Tensor& idx, int64_t size, bool allow_negative, int64_t* value) {
  Tensor slot = empty({1}, TensorOptions(kInt64).device(idx.device()));
  const int64_t bad = detail::require_cuda(op).index_first_out_of_range(idx.data_ptr<int64_t>(), idx.numel(), size,
                                                                         allow_negative, slot.raw_data(),
                                                                         idx.device().index);
  if (bad >= 0) *value = reshape(idx, {-1}).to_vector<int64_t>()[static_cast<size_t>(bad)];
  return bad;
}

// The CUDA twin of checked_indices: a contiguous int64 index on the device whose entries are
// all in [-size, size) (negative ones are wrapped by the kernels), checked by a kernel before
// anything is written; the same IndexError as on CPU otherwise. See Note [Kernels as
// launch-grid functors] in core/kernels/launch.h.
Tensor checked_indices_cuda(const char* op, const Tensor& index, int64_t size, int64_t dim) {
  Tensor idx = contiguous(to(index, kInt64));
  int64_t v = 0;
  if (first_bad_index_cuda(op, idx, size, /*allow_negative=*/true, &v) >= 0) {
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
  if (a.device().is_cuda()) {
    Tensor idx = checked_indices_cuda("index_select", index, src.sizes()[dim], dim);
    IntList out_sizes = src.sizes();
    out_sizes[dim] = idx.numel();
    Tensor out = empty(out_sizes, TensorOptions(a.dtype()).device(a.device()));
    const auto g = detail::index_select_geometry(src, dim, idx.numel());
    detail::require_cuda("index_select")
        .index_gather(a.dtype(), g, idx.data_ptr<int64_t>(), src.raw_data(), out.raw_data(), a.device().index);
    return a.dim() == 0 ? reshape(out, {}) : out;
  }
  auto idx = checked_indices("index_select", index, src.sizes()[dim], dim);
  IntList out_sizes = src.sizes();
  out_sizes[dim] = static_cast<int64_t>(idx.size());
  Tensor out = empty(out_sizes, TensorOptions(a.dtype()).device(a.device()));
  Tensor sc = contiguous(src);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= sc.sizes()[d];
  for (int64_t d = dim + 1; d < sc.dim(); ++d) inner *= sc.sizes()[d];
  const int64_t src_dim = sc.sizes()[dim];
  const size_t es = a.element_size();
  const char* sp = static_cast<const char*>(sc.raw_data());
  char* op = static_cast<char*>(out.raw_data());
  const int64_t n = static_cast<int64_t>(idx.size());
  const size_t row_bytes = static_cast<size_t>(inner) * es;
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t o = r / n, i = r % n;
      std::memcpy(op + static_cast<size_t>(r) * row_bytes,
                  sp + (static_cast<size_t>(o * src_dim + idx[i])) * row_bytes, row_bytes);
    }
  };
  int64_t rows = outer * n;
  if (rows * inner < 65536) {
    body(0, rows);
  } else {
    parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), body);
  }
  if (a.dim() == 0) return reshape(out, {});
  return out;
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
  if (a.device().is_cuda()) {
    const int64_t size = a.dim() ? a.sizes()[dim] : 1;
    Tensor idx = checked_indices_cuda("gather", index, size, dim);
    Tensor out = empty(index.sizes(), TensorOptions(a.dtype()).device(a.device()));
    const auto g = detail::gather_geometry(a, dim, index.sizes());
    detail::require_cuda("gather").index_gather(a.dtype(), g, idx.data_ptr<int64_t>(), a.raw_data(), out.raw_data(),
                                                a.device().index);
    return out;
  }
  auto idx = checked_indices("gather", index, a.dim() ? a.sizes()[dim] : 1, dim);
  Tensor out = empty(index.sizes(), TensorOptions(a.dtype()).device(a.device()));
  IntList cs = contiguous_strides(index.sizes());
  EMBER_DISPATCH_ALL(a.dtype(), "gather", [&] {
    const scalar_t* ap = static_cast<const scalar_t*>(a.raw_data());
    scalar_t* o = out.data_ptr<scalar_t>();
    for (int64_t lin = 0; lin < out.numel(); ++lin) {
      int64_t rem = lin, off = 0;
      for (int64_t d = 0; d < a.dim(); ++d) {
        int64_t c = rem / cs[d];
        rem %= cs[d];
        off += (d == dim ? idx[lin] : c) * a.strides()[d];
      }
      o[lin] = ap[off];
    }
  });
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
  if (self.device().is_cuda()) {
    const int64_t size = self.dim() ? self.sizes()[dim] : 1;
    if (is_floating_point(self.dtype())) alert_not_deterministic("scatter_add_ (CUDA, floating point: atomic adds)");
    Tensor idx = checked_indices_cuda("scatter_add_", index, size, dim);
    const auto g = detail::scatter_add_geometry(self, dim, index.sizes(), src);
    detail::require_cuda("scatter_add_")
        .index_scatter_add(self.dtype(), g, idx.data_ptr<int64_t>(), src.raw_data(), self.raw_data(),
                           self.device().index);
    self.bump_version();
    return self;
  }
  auto idx = checked_indices("scatter_add_", index, self.dim() ? self.sizes()[dim] : 1, dim);
  IntList cs = contiguous_strides(index.sizes());
  EMBER_DISPATCH_NUMERIC(self.dtype(), "scatter_add_", [&] {
    scalar_t* sp = static_cast<scalar_t*>(self.raw_data());
    const scalar_t* srp = static_cast<const scalar_t*>(src.raw_data());
    for (int64_t lin = 0; lin < index.numel(); ++lin) {
      int64_t rem = lin, off = 0, soff = 0;
      for (int64_t d = 0; d < self.dim(); ++d) {
        int64_t c = rem / cs[d];
        rem %= cs[d];
        off += (d == dim ? idx[lin] : c) * self.strides()[d];
        soff += c * src.strides()[d];
      }
      sp[off] += srp[soff];
    }
  });
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
  if (self.device().is_cuda()) {
    if (is_floating_point(self.dtype())) alert_not_deterministic("index_add_ (CUDA, floating point: atomic adds)");
    Tensor idx = checked_indices_cuda("index_add_", index, self.sizes()[dim], dim);
    IntList expect = self.sizes();
    expect[dim] = idx.numel();
    EMBER_CHECK_T(ValueError, src.sizes() == expect, "index_add_: source of shape ", src.sizes(), " must have shape ",
                  expect, " (self ", self.sizes(), " with dimension ", dim, " replaced by the index length)");
    const auto g = detail::index_add_geometry(self, dim, src);
    detail::require_cuda("index_add_")
        .index_scatter_add(self.dtype(), g, idx.data_ptr<int64_t>(), src.raw_data(), self.raw_data(),
                           self.device().index);
    self.bump_version();
    return self;
  }
  auto idx = checked_indices("index_add_", index, self.sizes()[dim], dim);
  IntList expect = self.sizes();
  expect[dim] = static_cast<int64_t>(idx.size());
  EMBER_CHECK_T(ValueError, src.sizes() == expect, "index_add_: source of shape ", src.sizes(), " must have shape ", expect,
                " (self ", self.sizes(), " with dimension ", dim, " replaced by the index length)");
  for (size_t i = 0; i < idx.size(); ++i) {
    Tensor dst = select(self, dim, idx[i]);
    Tensor part = select(src, dim, static_cast<int64_t>(i));
    add_(dst, part);
  }
  self.bump_version();
  return self;
}

Tensor one_hot(const Tensor& index, int64_t num_classes) {
  EMBER_CHECK_T(TypeError, index.dtype() == kInt64, "one_hot: one_hot is only applicable to index tensor of type int64, got ",
                index.dtype());
  Tensor idx = contiguous(index);
  if (index.device().is_cuda()) {  // the same checks and result as below, without reading the index on the host
    if (num_classes < 0) num_classes = idx.numel() == 0 ? 0 : std::max<int64_t>(0, amax(idx).item<int64_t>() + 1);
    int64_t v = 0;
    if (first_bad_index_cuda("one_hot", idx, num_classes, /*allow_negative=*/false, &v) >= 0) {
      EMBER_THROW(IndexError, "one_hot: class values must be in [0, ", num_classes, "), got ", v);
    }
    IntList s = index.sizes();
    s.push_back(num_classes);
    Tensor out = zeros(s, TensorOptions(kInt64).device(index.device()));
    detail::require_cuda("one_hot").one_hot(idx.data_ptr<int64_t>(), idx.numel(), num_classes, out.data_ptr<int64_t>(),
                                            idx.device().index);
    return out;
  }
  const int64_t* p = idx.data_ptr<int64_t>();
  if (num_classes < 0) {
    num_classes = 0;
    for (int64_t i = 0; i < idx.numel(); ++i) num_classes = std::max(num_classes, p[i] + 1);
  }
  IntList s = index.sizes();
  s.push_back(num_classes);
  Tensor out = zeros(s, TensorOptions(kInt64).device(index.device()));
  int64_t* o = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < idx.numel(); ++i) {
    EMBER_CHECK_T(IndexError, p[i] >= 0 && p[i] < num_classes, "one_hot: class values must be in [0, ", num_classes,
                  "), got ", p[i]);
  }
  for (int64_t i = 0; i < idx.numel(); ++i) o[i * num_classes + p[i]] = 1;
  return out;
}

}  // namespace ember::native
