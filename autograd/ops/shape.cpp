// Differentiable views and joining/splitting. A view's backward maps the gradient of the view
// back to the base's shape (into a zero tensor for narrowing views).
#include "autograd/autocast.h"
#include "autograd/ops/detail.h"

namespace ember {
using autograd::FunctionNode;
using autograd::record;
using autograd::TensorList;
using autograd::detail::InputMeta;

namespace {
Tensor zeros_for(const InputMeta& m, const Tensor& like) {
  return zeros(m.sizes, TensorOptions(like.dtype()).device(like.device()));
}
// Gradient of a view whose elements are a sub-block of the input (narrow/select/slice).
template <typename ViewFn>
TensorList embed_grad(const InputMeta& m, const Tensor& g, ViewFn fn) {
  Tensor z = zeros_for(m, g);
  Tensor dst = fn(z);
  native::copy_(dst, g);
  return {z};
}
}  // namespace

Tensor view(const Tensor& a, const IntList& sizes) {
  Tensor out = native::view(a, sizes);
  record("ViewBackward0", {&a}, {&out}, [m = InputMeta(a)](FunctionNode&, TensorList& g) {
    return TensorList{native::reshape(g[0], m.sizes)};
  });
  return out;
}

Tensor reshape(const Tensor& a, const IntList& sizes) {
  Tensor out = native::reshape(a, sizes);
  record("ReshapeAliasBackward0", {&a}, {&out}, [m = InputMeta(a)](FunctionNode&, TensorList& g) {
    return TensorList{native::reshape(g[0], m.sizes)};
  });
  return out;
}

Tensor transpose(const Tensor& a, int64_t d0, int64_t d1) {
  Tensor out = native::transpose(a, d0, d1);
  record("TransposeBackward0", {&a}, {&out}, [d0, d1](FunctionNode&, TensorList& g) {
    return TensorList{native::transpose(g[0], d0, d1)};
  });
  return out;
}

Tensor t(const Tensor& a) {
  Tensor out = native::t(a);
  record("TBackward0", {&a}, {&out}, [](FunctionNode&, TensorList& g) { return TensorList{native::t(g[0])}; });
  return out;
}

Tensor permute(const Tensor& a, const IntList& dims) {
  Tensor out = native::permute(a, dims);
  record("PermuteBackward0", {&a}, {&out}, [dims](FunctionNode&, TensorList& g) {
    IntList inv(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) {
      inv[wrap_dim(dims[i], static_cast<int64_t>(dims.size()), "permute")] = static_cast<int64_t>(i);
    }
    return TensorList{native::permute(g[0], inv)};
  });
  return out;
}

Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length) {
  Tensor out = native::narrow(a, dim, start, length);
  record("NarrowBackward0", {&a}, {&out}, [m = InputMeta(a), dim, start, length](FunctionNode&, TensorList& g) {
    return embed_grad(m, g[0], [&](const Tensor& z) { return native::narrow(z, dim, start, length); });
  });
  return out;
}

Tensor select(const Tensor& a, int64_t dim, int64_t index) {
  Tensor out = native::select(a, dim, index);
  record("SelectBackward0", {&a}, {&out}, [m = InputMeta(a), dim, index](FunctionNode&, TensorList& g) {
    return embed_grad(m, g[0], [&](const Tensor& z) { return native::select(z, dim, index); });
  });
  return out;
}

Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end, int64_t step) {
  Tensor out = native::slice(a, dim, start, end, step);
  record("SliceBackward0", {&a}, {&out}, [m = InputMeta(a), dim, start, end, step](FunctionNode&, TensorList& g) {
    return embed_grad(m, g[0], [&](const Tensor& z) { return native::slice(z, dim, start, end, step); });
  });
  return out;
}

Tensor expand(const Tensor& a, const IntList& sizes) {
  Tensor out = native::expand(a, sizes);
  record("ExpandBackward0", {&a}, {&out}, [m = InputMeta(a)](FunctionNode&, TensorList& g) {
    return TensorList{native::sum_to_size(g[0], m.sizes)};
  });
  return out;
}

Tensor unsqueeze(const Tensor& a, int64_t dim) {
  Tensor out = native::unsqueeze(a, dim);
  record("UnsqueezeBackward0", {&a}, {&out}, [m = InputMeta(a)](FunctionNode&, TensorList& g) {
    return TensorList{native::reshape(g[0], m.sizes)};
  });
  return out;
}

Tensor squeeze(const Tensor& a) {
  Tensor out = native::squeeze(a);
  record("SqueezeBackward0", {&a}, {&out}, [m = InputMeta(a)](FunctionNode&, TensorList& g) {
    return TensorList{native::reshape(g[0], m.sizes)};
  });
  return out;
}

Tensor squeeze(const Tensor& a, int64_t dim) {
  Tensor out = native::squeeze(a, dim);
  record("SqueezeBackward1", {&a}, {&out}, [m = InputMeta(a)](FunctionNode&, TensorList& g) {
    return TensorList{native::reshape(g[0], m.sizes)};
  });
  return out;
}

Tensor flatten(const Tensor& a, int64_t start_dim, int64_t end_dim) {
  Tensor out = native::flatten(a, start_dim, end_dim);
  if (out.is_same(a)) return a;
  record("FlattenBackward0", {&a}, {&out}, [m = InputMeta(a)](FunctionNode&, TensorList& g) {
    return TensorList{native::reshape(g[0], m.sizes)};
  });
  return out;
}

// ---- joining / splitting ----------------------------------------------------------------------

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  Tensor out = native::cat(tensors, dim);
  bool need = false;
  for (const auto& t : tensors) need = need || (t.defined() && t.requires_grad());
  if (!need || !autograd::GradMode::is_enabled()) return out;
  std::vector<InputMeta> metas;
  for (const auto& t : tensors) metas.emplace_back(t);
  int64_t d = wrap_dim(dim, out.dim(), "cat");
  auto node = std::make_shared<FunctionNode>("CatBackward0", [metas, d](FunctionNode& n, TensorList& g) {
    TensorList r(metas.size());
    int64_t off = 0;
    for (size_t i = 0; i < metas.size(); ++i) {
      const auto& m = metas[i];
      if (m.sizes.size() == 1 && m.sizes[0] == 0) continue;
      int64_t len = m.sizes[d];
      if (n.needs_input_grad(i)) r[i] = autograd::detail::reduce_grad(native::narrow(g[0], d, off, len), m);
      off += len;
    }
    return r;
  });
  std::vector<const Tensor*> ins;
  for (const auto& t : tensors) ins.push_back(&t);
  autograd::set_history(node, ins, std::vector<Tensor*>{&out});
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK_T(ValueError, !tensors.empty(), "stack: expects a non-empty TensorList");
  int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EMBER_CHECK_T(ValueError, tensors[i].sizes() == tensors[0].sizes(), "stack: expects each tensor to be equal size, but got ",
                  tensors[0].sizes(), " at entry 0 and ", tensors[i].sizes(), " at entry ", i);
    parts.push_back(unsqueeze(tensors[i], d));
  }
  return cat(parts, d);
}

std::vector<Tensor> split_with_sizes(const Tensor& a, const IntList& sizes, int64_t dim) {
  auto parts = native::split_with_sizes(a, sizes, dim);  // validates
  int64_t d = wrap_dim(dim, a.dim(), "split_with_sizes");
  std::vector<Tensor> out;
  int64_t off = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    out.push_back(narrow(a, d, off, sizes[i]));
    off += sizes[i];
  }
  return out;
}

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  auto parts = native::split(a, split_size, dim);
  IntList sizes;
  int64_t d = wrap_dim(dim, a.dim(), "split");
  for (auto& p : parts) sizes.push_back(p.sizes()[d]);
  return split_with_sizes(a, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  auto parts = native::chunk(a, chunks, dim);
  IntList sizes;
  int64_t d = wrap_dim(dim, a.dim(), "chunk");
  for (auto& p : parts) sizes.push_back(p.sizes()[d]);
  return split_with_sizes(a, sizes, dim);
}

// ---- indexing ------------------------------------------------------------------------------------

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  Tensor out = native::index_select(a, dim, index);
  if (autograd::any_requires_grad({&a})) {
    autograd::SavedVariable si(index);
    record("IndexSelectBackward0", {&a}, {&out}, [si, m = InputMeta(a), dim](FunctionNode&, TensorList& g) {
      Tensor z = zeros(m.sizes, TensorOptions(g[0].dtype()).device(g[0].device()));
      native::index_add_(z, dim, native::reshape(si.unpack("IndexSelectBackward0"), {-1}), native::contiguous(g[0]));
      return TensorList{z};
    });
  }
  return out;
}

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  Tensor out = native::gather(a, dim, index);
  if (autograd::any_requires_grad({&a})) {
    autograd::SavedVariable si(index);
    record("GatherBackward0", {&a}, {&out}, [si, m = InputMeta(a), dim](FunctionNode&, TensorList& g) {
      Tensor z = zeros(m.sizes, TensorOptions(g[0].dtype()).device(g[0].device()));
      native::scatter_add_(z, dim, si.unpack("GatherBackward0"), native::contiguous(g[0]));
      return TensorList{z};
    });
  }
  return out;
}

Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = native::scatter_add(a, dim, index, src);
  if (autograd::any_requires_grad({&a, &src})) {
    autograd::SavedVariable si(index);
    record("ScatterAddBackward0", {&a, &src}, {&out}, [si, dim](FunctionNode& n, TensorList& g) {
      TensorList r(2);
      if (n.needs_input_grad(0)) r[0] = g[0];
      if (n.needs_input_grad(1)) r[1] = native::gather(g[0], dim, si.unpack("ScatterAddBackward0"));
      return r;
    });
  }
  return out;
}

// ---- softmax ----------------------------------------------------------------------------------------

Tensor softmax(const Tensor& a0, int64_t dim) {
  const Tensor a = autograd::autocast_to_float32(a0);  // See Note [Autocast op lists]
  Tensor out = native::softmax(a, dim);
  if (autograd::any_requires_grad({&a})) {
    autograd::SavedVariable so(out);
    record("SoftmaxBackward0", {&a}, {&out}, [so, dim](FunctionNode&, TensorList& g) {
      return TensorList{native::softmax_backward(g[0], so.unpack("SoftmaxBackward0"), dim)};
    });
  }
  return out;
}

Tensor log_softmax(const Tensor& a0, int64_t dim) {
  const Tensor a = autograd::autocast_to_float32(a0);  // See Note [Autocast op lists]
  Tensor out = native::log_softmax(a, dim);
  if (autograd::any_requires_grad({&a})) {
    autograd::SavedVariable so(out);
    record("LogSoftmaxBackward0", {&a}, {&out}, [so, dim](FunctionNode&, TensorList& g) {
      return TensorList{native::log_softmax_backward(g[0], so.unpack("LogSoftmaxBackward0"), dim)};
    });
  }
  return out;
}

}  // namespace ember
