// Views (share storage, adjust sizes/strides/offset) and joining/splitting.
#include <algorithm>
#include <numeric>

#include "core/detail/checked_math.h"
#include "core/ops/detail/plan.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember::native {
using ::ember::detail::checked_add;
using ::ember::detail::checked_mul;

namespace {


// Every view goes through here: refresh() checks the shape (Note [Checked shape arithmetic]),
// and the view must lie inside its storage, so no view can reach memory its base does not own.
Tensor make_view(const Tensor& a, IntList sizes, IntList strides, int64_t offset, const char* op) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = a.storage();
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = a.dtype();
  impl->version = a.impl()->version;  // views share the version counter with their base
  impl->is_view = true;
  impl->view_base = a.impl()->is_view && a.impl()->view_base ? a.impl()->view_base : a.impl_ptr();
  impl->inference = a.impl()->inference;  // a view is an inference tensor iff its base is
  impl->refresh(op);
  impl->check_in_storage(op);
  return Tensor(std::move(impl));
}

IntList infer_size(const IntList& shape, int64_t numel, const char* op) {
  IntList out = shape;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      EMBER_CHECK_T(ValueError, infer < 0, op, ": only one dimension can be inferred (got shape ", shape, ")");
      infer = static_cast<int>(i);
    } else {
      EMBER_CHECK_T(ValueError, shape[i] >= 0, op, ": invalid shape dimension ", shape[i], " in ", shape);
      known = checked_mul(known, shape[i], op, shape);
    }
  }
  if (infer >= 0) {
    EMBER_CHECK_T(ValueError, known != 0 && numel % known == 0, op, ": shape '", shape,
                  "' is invalid for input of size ", numel);
    out[infer] = numel / known;
  } else {
    EMBER_CHECK_T(ValueError, known == numel, op, ": shape '", shape, "' is invalid for input of size ", numel);
  }
  return out;
}

// Strides for viewing `a` with `shape` without copying, if possible (PyTorch's computeStride).
bool compute_view_strides(const Tensor& a, const IntList& shape, IntList& out) {
  const auto& old_sizes = a.sizes();
  const auto& old_strides = a.strides();
  out.assign(shape.size(), 0);
  if (a.numel() == 0) {
    out = contiguous_strides(shape);
    return true;
  }
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.empty() ? 1 : old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t td = static_cast<int64_t>(old_sizes.size()) - 1; td >= 0; --td) {
    tensor_numel *= old_sizes[td];
    if (td == 0 || (old_sizes[td - 1] != 1 && old_strides[td - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (td > 0) {
        chunk_base_stride = old_strides[td - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) {
    for (; view_d >= 0; --view_d) out[view_d] = 1;  // trailing size-1 dims of a scalar
  }
  return true;
}

}  // namespace

Tensor view(const Tensor& a, const IntList& sizes) {
  IntList shape = infer_size(sizes, a.numel(), "view");
  IntList strides;
  EMBER_CHECK(compute_view_strides(a, shape, strides), "view: view size ", shape,
              " is not compatible with input tensor's size ", a.sizes(), " and stride ", a.strides(),
              " (at least one dimension spans across two contiguous subspaces). Use reshape(...) instead.");
  return make_view(a, shape, strides, a.storage_offset(), "view");
}

Tensor reshape(const Tensor& a, const IntList& sizes) {
  IntList shape = infer_size(sizes, a.numel(), "reshape");
  IntList strides;
  if (compute_view_strides(a, shape, strides)) return make_view(a, shape, strides, a.storage_offset(), "reshape");
  return view(clone(a), shape);
}

Tensor transpose(const Tensor& a, int64_t d0, int64_t d1) {
  int64_t n = a.dim();
  d0 = wrap_dim(d0, n, "transpose");  // a 0-dim tensor accepts 0 and -1
  d1 = wrap_dim(d1, n, "transpose");
  if (n == 0) return make_view(a, {}, {}, a.storage_offset(), "transpose");
  IntList s = a.sizes(), st = a.strides();
  std::swap(s[d0], s[d1]);
  std::swap(st[d0], st[d1]);
  return make_view(a, s, st, a.storage_offset(), "transpose");
}

Tensor t(const Tensor& a) {
  EMBER_CHECK_T(ValueError, a.dim() <= 2, "t: expects a tensor with <= 2 dimensions, but self is ", a.dim(), "D");
  if (a.dim() < 2) return make_view(a, a.sizes(), a.strides(), a.storage_offset(), "t");
  return transpose(a, 0, 1);
}

Tensor permute(const Tensor& a, const IntList& dims) {
  int64_t n = a.dim();
  EMBER_CHECK_T(ValueError, static_cast<int64_t>(dims.size()) == n, "permute: number of dims don't match in permute (input has ",
                n, " dims, got ", dims, ")");
  IntList s(n), st(n);
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[i], n, "permute");
    EMBER_CHECK_T(ValueError, !seen[d], "permute: repeated dim ", dims[i], " in ", dims);
    seen[d] = true;
    s[i] = a.sizes()[d];
    st[i] = a.strides()[d];
  }
  return make_view(a, s, st, a.storage_offset(), "permute");
}

Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length) {
  EMBER_CHECK_T(IndexError, a.dim() > 0, "narrow: cannot be applied to a 0-dim tensor");
  dim = wrap_dim(dim, a.dim(), "narrow");
  int64_t size = a.sizes()[dim];
  if (start < 0) start += size;
  EMBER_CHECK_T(IndexError, start >= 0 && length >= 0 && length <= size - start, "narrow: start (", start,
                ") + length (", length, ") exceeds dimension size (", size, ") of dim ", dim);
  IntList s = a.sizes();
  s[dim] = length;
  return make_view(a, s, a.strides(), a.storage_offset() + start * a.strides()[dim], "narrow");
}

Tensor select(const Tensor& a, int64_t dim, int64_t index) {
  EMBER_CHECK_T(IndexError, a.dim() > 0, "select: cannot be applied to a 0-dim tensor");
  dim = wrap_dim(dim, a.dim(), "select");
  int64_t size = a.sizes()[dim];
  EMBER_CHECK_T(IndexError, index >= -size && index < size, "select: index ", index,
                " out of range for tensor of size ", a.sizes(), " at dimension ", dim);
  if (index < 0) index += size;
  IntList s = a.sizes(), st = a.strides();
  int64_t off = a.storage_offset() + index * st[dim];
  s.erase(s.begin() + dim);
  st.erase(st.begin() + dim);
  return make_view(a, s, st, off, "select");
}

Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end, int64_t step) {
  EMBER_CHECK_T(IndexError, a.dim() > 0, "slice: cannot be applied to a 0-dim tensor");
  EMBER_CHECK_T(ValueError, step > 0, "slice: step must be positive, got ", step);
  dim = wrap_dim(dim, a.dim(), "slice");
  int64_t size = a.sizes()[dim];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  IntList s = a.sizes(), st = a.strides();
  s[dim] = (end - start) / step + ((end - start) % step != 0 ? 1 : 0);
  int64_t off = a.storage_offset() + start * st[dim];
  // With at most one element left the stride is never used; keep it rather than overflow.
  if (s[dim] > 1) st[dim] = checked_mul(st[dim], step, "slice", a.sizes(), "the stride times step");
  return make_view(a, s, st, off, "slice");
}

Tensor expand(const Tensor& a, const IntList& sizes) {
  int64_t n = static_cast<int64_t>(sizes.size());
  EMBER_CHECK_T(ValueError, n >= a.dim(), "expand: the number of sizes provided (", n,
                ") must be greater or equal to the number of dimensions in the tensor (", a.dim(), ")");
  IntList s(n), st(n);
  for (int64_t i = n - 1; i >= 0; --i) {
    int64_t off = i - (n - a.dim());
    int64_t want = sizes[i];
    if (off >= 0) {
      int64_t have = a.sizes()[off];
      if (want == -1) want = have;
      EMBER_CHECK_T(ValueError, have == want || (have == 1 && want >= 0), "expand: the expanded size of the tensor (", want,
                    ") must match the existing size (", have, ") at non-singleton dimension ", i,
                    ".  Target sizes: ", sizes, ".  Tensor sizes: ", a.sizes());
      s[i] = want;
      st[i] = have == want ? a.strides()[off] : 0;
    } else {
      EMBER_CHECK_T(ValueError, want >= 0, "expand: -1 is not allowed in a leading, non-existing dimension ", i);
      s[i] = want;
      st[i] = 0;
    }
  }
  return make_view(a, s, st, a.storage_offset(), "expand");
}

Tensor unsqueeze(const Tensor& a, int64_t dim) {
  dim = wrap_dim(dim, a.dim() + 1, "unsqueeze");
  IntList s = a.sizes(), st = a.strides();
  int64_t new_stride = dim < a.dim() ? checked_mul(s[dim], st[dim], "unsqueeze", s, "the new stride") : 1;
  s.insert(s.begin() + dim, 1);
  st.insert(st.begin() + dim, new_stride);
  return make_view(a, s, st, a.storage_offset(), "unsqueeze");
}

Tensor squeeze(const Tensor& a) {
  IntList s, st;
  for (int64_t i = 0; i < a.dim(); ++i) {
    if (a.sizes()[i] != 1) {
      s.push_back(a.sizes()[i]);
      st.push_back(a.strides()[i]);
    }
  }
  return make_view(a, s, st, a.storage_offset(), "squeeze");
}

Tensor squeeze(const Tensor& a, int64_t dim) {
  dim = wrap_dim(dim, a.dim(), "squeeze");  // a 0-dim tensor accepts 0 and -1
  if (a.dim() == 0) return make_view(a, {}, {}, a.storage_offset(), "squeeze");
  if (a.sizes()[dim] != 1) return make_view(a, a.sizes(), a.strides(), a.storage_offset(), "squeeze");
  IntList s = a.sizes(), st = a.strides();
  s.erase(s.begin() + dim);
  st.erase(st.begin() + dim);
  return make_view(a, s, st, a.storage_offset(), "squeeze");
}

Tensor flatten(const Tensor& a, int64_t start_dim, int64_t end_dim) {
  if (a.dim() == 0) return reshape(a, {1});
  start_dim = wrap_dim(start_dim, a.dim(), "flatten");
  end_dim = wrap_dim(end_dim, a.dim(), "flatten");
  EMBER_CHECK_T(ValueError, start_dim <= end_dim, "flatten: start_dim (", start_dim, ") cannot come after end_dim (",
                end_dim, ")");
  IntList s(a.sizes().begin(), a.sizes().begin() + start_dim);
  int64_t m = 1;
  for (int64_t i = start_dim; i <= end_dim; ++i) m = checked_mul(m, a.sizes()[i], "flatten", a.sizes());
  s.push_back(m);
  s.insert(s.end(), a.sizes().begin() + end_dim + 1, a.sizes().end());
  return reshape(a, s);
}

Tensor as_strided(const Tensor& a, const IntList& sizes, const IntList& strides, int64_t offset) {
  EMBER_CHECK_T(ValueError, sizes.size() == strides.size(), "as_strided: mismatch in length of strides and shape");
  EMBER_CHECK_T(ValueError, offset >= 0, "as_strided: negative storage offset ", offset);
  int64_t max_off = offset;
  for (size_t i = 0; i < sizes.size(); ++i) {
    EMBER_CHECK_T(ValueError, sizes[i] >= 0 && strides[i] >= 0, "as_strided: negative size or stride");
    if (sizes[i] == 0) { max_off = -1; break; }
    max_off = checked_add(max_off, checked_mul(sizes[i] - 1, strides[i], "as_strided", sizes, "the extent"),
                          "as_strided", sizes, "the extent");
  }
  EMBER_CHECK_T(IndexError,
                max_off < static_cast<int64_t>(a.storage().num_bytes() / a.element_size()),
                "as_strided: setStorage: sizes ", sizes, ", strides ", strides, " and storage offset ", offset,
                " require a larger storage than the ", a.storage().num_bytes(), " bytes available");
  return make_view(a, sizes, strides, offset, "as_strided");
}

// ---- joining and splitting --------------------------------------------------------------

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK_T(ValueError, !tensors.empty(), "cat: expected a non-empty list of Tensors");
  // PyTorch skips 1-D empty tensors for legacy reasons; so do we.
  const Tensor* ref = nullptr;
  for (const auto& t : tensors) {
    if (!(t.dim() == 1 && t.numel() == 0)) { ref = &t; break; }
  }
  if (!ref) return clone(tensors[0]);
  EMBER_CHECK_T(ValueError, ref->dim() > 0, "cat: zero-dimensional tensor cannot be concatenated");
  dim = wrap_dim(dim, ref->dim(), "cat");
  IntList out_sizes = ref->sizes();
  int64_t total = 0;
  DType dt = ref->dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.dim() == 1 && t.numel() == 0) continue;
    EMBER_CHECK_T(ValueError, t.dim() == ref->dim(), "cat: tensors must have same number of dimensions: got ",
                  ref->dim(), " and ", t.dim(), " (tensor ", i, ")");
    EMBER_CHECK(t.device() == ref->device(), "cat: expected all tensors to be on the same device, but found ",
                ref->device(), " and ", t.device(), " (tensor ", i, ")");
    for (int64_t d = 0; d < t.dim(); ++d) {
      EMBER_CHECK_T(ValueError, d == dim || t.sizes()[d] == ref->sizes()[d], "cat: sizes of tensors must match except in dimension ",
                    dim, ". Expected size ", ref->sizes()[d], " but got size ", t.sizes()[d], " for tensor number ", i,
                    " in the list.");
    }
    total = checked_add(total, t.sizes()[dim], "cat", t.sizes(), "the concatenated size");
    dt = promote_types(dt, t.dtype());
  }
  out_sizes[dim] = total;
  Tensor out = empty(out_sizes, TensorOptions(dt).device(ref->device()));
  int64_t off = 0;
  for (const auto& t : tensors) {
    if (t.dim() == 1 && t.numel() == 0) continue;
    Tensor dst = narrow(out, dim, off, t.sizes()[dim]);
    copy_(dst, t);
    off += t.sizes()[dim];
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK_T(ValueError, !tensors.empty(), "stack: expects a non-empty TensorList");
  dim = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EMBER_CHECK_T(ValueError, tensors[i].sizes() == tensors[0].sizes(), "stack: expects each tensor to be equal size, but got ",
                  tensors[0].sizes(), " at entry 0 and ", tensors[i].sizes(), " at entry ", i);
    parts.push_back(unsqueeze(tensors[i], dim));
  }
  return cat(parts, dim);
}

std::vector<Tensor> split_with_sizes(const Tensor& a, const IntList& sizes, int64_t dim) {
  EMBER_CHECK_T(IndexError, a.dim() > 0, "split_with_sizes: expects a tensor with at least 1 dimension");
  dim = wrap_dim(dim, a.dim(), "split_with_sizes");
  int64_t total = 0;
  for (auto s : sizes) {
    EMBER_CHECK_T(ValueError, s >= 0, "split_with_sizes: sizes must be non-negative, got ", sizes);
    total = checked_add(total, s, "split_with_sizes", sizes, "the sum of the split sizes");
  }
  EMBER_CHECK_T(ValueError, total == a.sizes()[dim], "split_with_sizes: expects split_sizes to sum exactly to ",
                a.sizes()[dim], " (input tensor's size at dimension ", dim, "), but got split_sizes=", sizes);
  std::vector<Tensor> out;
  int64_t off = 0;
  for (auto s : sizes) {
    out.push_back(narrow(a, dim, off, s));
    off += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  EMBER_CHECK_T(IndexError, a.dim() > 0, "split: expects a tensor with at least 1 dimension");
  EMBER_CHECK_T(ValueError, split_size > 0 || a.sizes()[wrap_dim(dim, a.dim(), "split")] == 0,
                "split: split_size must be positive, got ", split_size);
  dim = wrap_dim(dim, a.dim(), "split");
  int64_t n = a.sizes()[dim];
  IntList sizes;
  for (int64_t off = 0; off < n; off += std::min(split_size, n - off)) sizes.push_back(std::min(split_size, n - off));
  if (sizes.empty()) sizes.push_back(0);
  return split_with_sizes(a, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  EMBER_CHECK_T(ValueError, chunks > 0, "chunk: number of chunks must be greater than 0, got ", chunks);
  EMBER_CHECK_T(IndexError, a.dim() > 0, "chunk: expects at least a 1-dimensional tensor");
  dim = wrap_dim(dim, a.dim(), "chunk");
  int64_t n = a.sizes()[dim];
  // A 0-size dim splits into `chunks` empty pieces, as in PyTorch (split would return one).
  if (n == 0) return split_with_sizes(a, IntList(static_cast<size_t>(chunks), 0), dim);
  int64_t size = n / chunks + (n % chunks != 0 ? 1 : 0);
  return split(a, std::max<int64_t>(size, 1), dim);
}

}  // namespace ember::native
