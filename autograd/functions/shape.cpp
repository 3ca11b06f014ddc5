// Differentiable views and joining/splitting. A view's backward maps the gradient of the view
// back to the base's shape (into a zero tensor for narrowing views).
#include "autograd/autocast.h"
#include "autograd/functions/detail.h"

namespace ember {

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
// A view with the input's elements in another shape: the gradient is reshaped back.
Tensor reshaped_view(const Tensor& a, Tensor out, const char* name) {
  record(name, {&a}, {&out}, [m = InputMeta(a)](FunctionNode&, TensorList& g) {
    return TensorList{native::reshape(g[0], m.sizes)};
  });
  return out;
}
}  // namespace

Tensor view(const Tensor& a, const IntList& sizes) { return reshaped_view(a, native::view(a, sizes), "ViewBackward0"); }

Tensor reshape(const Tensor& a, const IntList& sizes) { return reshaped_view(a, native::reshape(a, sizes), "ReshapeAliasBackward0"); }

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

Tensor unsqueeze(const Tensor& a, int64_t dim) { return reshaped_view(a, native::unsqueeze(a, dim), "UnsqueezeBackward0"); }

Tensor squeeze(const Tensor& a) { return reshaped_view(a, native::squeeze(a), "SqueezeBackward0"); }

Tensor squeeze(const Tensor& a, int64_t dim) { return reshaped_view(a, native::squeeze(a, dim), "SqueezeBackward1"); }

Tensor flatten(const Tensor& a, int64_t start_dim, int64_t end_dim) {
  Tensor out = native::flatten(a, start_dim, end_dim);
  return out.is_same(a) ? a : reshaped_view(a, std::move(out), "FlattenBackward0");
}

// ---- joining / splitting ----------------------------------------------------------------------

namespace {
// Records the node `backward(node, grads, metas)` for `out` computed from every tensor of
// `inputs` (cat, stack), when grad mode is on and one of them requires grad.
template <typename F>
void record_over_list(const char* name, const std::vector<Tensor>& inputs, Tensor& out, F backward) {
  bool need = false;
  for (const auto& t : inputs) need = need || (t.defined() && t.requires_grad());
  if (!need || !autograd::GradMode::is_enabled()) return;
  std::vector<InputMeta> metas;
  for (const auto& t : inputs) metas.emplace_back(t);
  auto node = std::make_shared<FunctionNode>(
      name, [metas, backward](FunctionNode& n, TensorList& g) { return backward(n, g[0], metas); });
  std::vector<const Tensor*> ins;
  for (const auto& t : inputs) ins.push_back(&t);
  autograd::set_history(node, ins, std::vector<Tensor*>{&out});
}
}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  Tensor out = native::cat(tensors, dim);
  const int64_t d = wrap_dim(dim, out.dim(), "cat");
  record_over_list("CatBackward0", tensors, out,
                   [d](FunctionNode& n, const Tensor& g, const std::vector<InputMeta>& metas) {
                     TensorList r(metas.size());
                     int64_t off = 0;
                     for (size_t i = 0; i < metas.size(); ++i) {
                       const auto& m = metas[i];
                       if (m.sizes.size() == 1 && m.sizes[0] == 0) continue;
                       const int64_t len = m.sizes[d];
                       if (n.needs_input_grad(i)) r[i] = reduce_grad(native::narrow(g, d, off, len), m);
                       off += len;
                     }
                     return r;
                   });
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  Tensor out = native::stack(tensors, dim);  // validates: non-empty, equal sizes
  const int64_t d = wrap_dim(dim, out.dim(), "stack");
  record_over_list("StackBackward0", tensors, out,
                   [d](FunctionNode& n, const Tensor& g, const std::vector<InputMeta>& metas) {
                     TensorList r(metas.size());
                     for (size_t i = 0; i < metas.size(); ++i) {
                       if (n.needs_input_grad(i)) r[i] = reduce_grad(native::select(g, d, static_cast<int64_t>(i)), metas[i]);
                     }
                     return r;
                   });
  return out;
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

namespace {
// split and chunk: native decides (and checks) the part sizes; the parts are differentiable narrows.
std::vector<Tensor> split_as(const Tensor& a, const std::vector<Tensor>& native_parts, int64_t dim, const char* op) {
  IntList sizes;
  const int64_t d = wrap_dim(dim, a.dim(), op);
  for (const auto& p : native_parts) sizes.push_back(p.sizes()[d]);
  return split_with_sizes(a, sizes, dim);
}
}  // namespace

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  return split_as(a, native::split(a, split_size, dim), dim, "split");
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  return split_as(a, native::chunk(a, chunks, dim), dim, "chunk");
}

// ---- indexing ------------------------------------------------------------------------------------

namespace {
// index_select and gather: the gradient accumulates into zeros of the input's shape at the
// positions the index read (`accumulate(z, dim, index, grad)`).
template <typename Fwd, typename Acc>
Tensor indexed_read(const Tensor& a, int64_t dim, const Tensor& index, const char* name, Fwd fwd, Acc accumulate) {
  Tensor out = fwd(a, dim, index);
  if (autograd::any_requires_grad({&a})) {
    autograd::SavedVariable si(index);
    record(name, {&a}, {&out}, [si, m = InputMeta(a), dim, name, accumulate](FunctionNode&, TensorList& g) {
      Tensor z = zeros_for(m, g[0]);
      accumulate(z, dim, si.unpack(name), native::contiguous(g[0]));
      return TensorList{z};
    });
  }
  return out;
}
}  // namespace

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  return indexed_read(a, dim, index, "IndexSelectBackward0", &native::index_select,
                      [](Tensor& z, int64_t d, const Tensor& i, const Tensor& g) {
                        native::index_add_(z, d, native::reshape(i, {-1}), g);
                      });
}

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  return indexed_read(a, dim, index, "GatherBackward0", &native::gather,
                      [](Tensor& z, int64_t d, const Tensor& i, const Tensor& g) { native::scatter_add_(z, d, i, g); });
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

namespace {
// softmax and log_softmax: float32 under autocast, backward from the output.
template <typename Fwd, typename Bwd>
Tensor softmax_like(const Tensor& a0, int64_t dim, const char* name, Fwd fwd, Bwd bwd) {
  const Tensor a = autograd::autocast_to_float32(a0);  // See Note [Autocast op lists]
  Tensor out = fwd(a, dim);
  if (autograd::any_requires_grad({&a})) {
    autograd::SavedVariable so(out);
    record(name, {&a}, {&out}, [so, dim, name, bwd](FunctionNode&, TensorList& g) {
      return TensorList{bwd(g[0], so.unpack(name), dim)};
    });
  }
  return out;
}
}  // namespace

Tensor softmax(const Tensor& a, int64_t dim) {
  return softmax_like(a, dim, "SoftmaxBackward0", &native::softmax, &native::softmax_backward);
}

Tensor log_softmax(const Tensor& a, int64_t dim) {
  return softmax_like(a, dim, "LogSoftmaxBackward0", &native::log_softmax, &native::log_softmax_backward);
}

}  // namespace ember
