// Differentiable reductions and matrix products.
#include <cmath>

#include "autograd/autocast.h"
#include "autograd/functions/detail.h"

namespace ember {

namespace {
// Re-inserts reduced dims (size 1) so a reduced gradient broadcasts against the input.
Tensor unsqueeze_reduced(const Tensor& g, const IntList& in_sizes, const IntList& dims, bool keepdim) {
  if (keepdim) return g;
  int64_t nd = static_cast<int64_t>(in_sizes.size());
  if (dims.empty()) return native::reshape(g, IntList(nd, 1));
  std::vector<bool> red(nd, false);
  for (auto d : dims) red[wrap_dim(d, nd, "sum")] = true;
  IntList s;
  int64_t k = 0;
  for (int64_t d = 0; d < nd; ++d) s.push_back(red[d] ? 1 : g.sizes()[k++]);
  return native::reshape(g, s);
}

Tensor minmax_reduce_backward(const Tensor& g, const Tensor& x, const Tensor& y, const IntList& dims, bool keepdim) {
  Tensor gy = unsqueeze_reduced(g, x.sizes(), dims, keepdim);
  Tensor yy = unsqueeze_reduced(y, x.sizes(), dims, keepdim);
  Tensor mask = native::to(native::eq(x, yy), x.dtype());
  // Ties share the gradient evenly, as PyTorch's amax/amin do.
  Tensor count = native::sum(mask, dims, true);
  return native::div(native::mul(mask, gy), count);
}
}  // namespace

Tensor sum(const Tensor& a0, const IntList& dims, bool keepdim) {
  const Tensor a = autograd::autocast_to_float32(a0);  // See Note [Autocast op lists]
  Tensor out = native::sum(a, dims, keepdim);
  record("SumBackward1", {&a}, {&out}, [ma = InputMeta(a), dims, keepdim](FunctionNode&, TensorList& g) {
    return TensorList{native::expand(unsqueeze_reduced(g[0], ma.sizes, dims, keepdim), ma.sizes)};
  });
  return out;
}

Tensor mean(const Tensor& a0, const IntList& dims, bool keepdim) {
  const Tensor a = autograd::autocast_to_float32(a0);
  Tensor out = native::mean(a, dims, keepdim);
  int64_t n = a.numel() / std::max<int64_t>(out.numel(), 1);
  record("MeanBackward1", {&a}, {&out}, [ma = InputMeta(a), dims, keepdim, n](FunctionNode&, TensorList& g) {
    Tensor gg = native::div(g[0], static_cast<double>(n));
    return TensorList{native::expand(unsqueeze_reduced(gg, ma.sizes, dims, keepdim), ma.sizes)};
  });
  return out;
}

namespace {
// amax and amin: ties share the gradient (minmax_reduce_backward).
Tensor minmax_reduce(const Tensor& a, const IntList& dims, bool keepdim, bool is_max) {
  Tensor out = is_max ? native::amax(a, dims, keepdim) : native::amin(a, dims, keepdim);
  if (autograd::any_requires_grad({&a})) {
    SavedVariable sa(a), so(out);
    const char* name = is_max ? "AmaxBackward0" : "AminBackward0";
    record(name, {&a}, {&out}, [sa, so, dims, keepdim, name](FunctionNode&, TensorList& g) {
      return TensorList{minmax_reduce_backward(g[0], sa.unpack(name), so.unpack(name), dims, keepdim)};
    });
  }
  return out;
}
}  // namespace

Tensor amax(const Tensor& a, const IntList& dims, bool keepdim) { return minmax_reduce(a, dims, keepdim, true); }
Tensor amin(const Tensor& a, const IntList& dims, bool keepdim) { return minmax_reduce(a, dims, keepdim, false); }

namespace {
std::pair<Tensor, Tensor> minmax_dim(const Tensor& a, int64_t dim, bool keepdim, bool is_max) {
  auto [vals, idx] = is_max ? native::max(a, dim, keepdim) : native::min(a, dim, keepdim);
  if (autograd::any_requires_grad({&a})) {
    SavedVariable si(idx);
    record(is_max ? "MaxBackward0" : "MinBackward0", {&a}, {&vals},
           [si, ma = InputMeta(a), dim, keepdim](FunctionNode&, TensorList& g) {
             int64_t d = wrap_dim(dim, static_cast<int64_t>(ma.sizes.size()), "max");
             Tensor gi = keepdim ? g[0] : native::unsqueeze(g[0], d);
             Tensor ii = si.unpack("MaxBackward0");
             if (!keepdim) ii = native::unsqueeze(ii, d);
             Tensor z = zeros(ma.sizes, TensorOptions(g[0].dtype()).device(g[0].device()));
             return TensorList{native::scatter_add_(z, d, ii, native::contiguous(gi))};
           });
  }
  return {vals, idx};
}
}  // namespace

std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim) { return minmax_dim(a, dim, keepdim, true); }
std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim) { return minmax_dim(a, dim, keepdim, false); }
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim) { return native::argmax(a, dim, keepdim); }

Tensor var(const Tensor& a0, const IntList& dims, int64_t correction, bool keepdim) {
  const Tensor a = autograd::autocast_to_float32(a0);
  Tensor m = mean(a, dims, true);
  Tensor d = sub(a, m);
  int64_t n = a.numel() / std::max<int64_t>(native::sum(a, dims, keepdim).numel(), 1);
  return div(sum(mul(d, d), dims, keepdim), static_cast<double>(std::max<int64_t>(n - correction, 0)));
}

Tensor norm(const Tensor& a0) {
  const Tensor a = autograd::autocast_to_float32(a0);
  return sqrt(sum(mul(a, a)));
}

Tensor sum_to_size(const Tensor& a, const IntList& sizes) {
  Tensor out = native::sum_to_size(a, sizes);
  if (out.is_same(a)) return a;
  record("SumToSizeBackward0", {&a}, {&out}, [ma = InputMeta(a)](FunctionNode&, TensorList& g) {
    return TensorList{native::contiguous(native::expand(g[0], ma.sizes))};
  });
  return out;
}

// ---- linear algebra ---------------------------------------------------------------------------

namespace {
// mm and bmm: C = A B, so dA = G B^T and dB = A^T G (`trans`: the transpose of the last two
// dims). Each operand is saved only when the other needs its gradient.
template <typename Fwd, typename Trans>
Tensor product(const Tensor& a0, const Tensor& b0, const char* name, Fwd fwd, Trans trans) {
  const Tensor a = autograd::autocast_to_lower(a0), b = autograd::autocast_to_lower(b0);
  Tensor out = fwd(a, b);
  if (autograd::any_requires_grad({&a, &b})) {
    SavedVariable sa(b.requires_grad() ? a : Tensor()), sb(a.requires_grad() ? b : Tensor());
    record(name, {&a, &b}, {&out}, [sa, sb, name, fwd, trans](FunctionNode& n, TensorList& g) {
      TensorList r(2);
      if (n.needs_input_grad(0)) r[0] = fwd(g[0], trans(sb.unpack(name)));
      if (n.needs_input_grad(1)) r[1] = fwd(trans(sa.unpack(name)), g[0]);
      return r;
    });
  }
  return out;
}
}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  return product(a, b, "MmBackward0", &native::mm, [](const Tensor& x) { return native::t(x); });
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  return product(a, b, "BmmBackward0", &native::bmm, [](const Tensor& x) { return native::transpose(x, 1, 2); });
}

Tensor matmul(const Tensor& a0, const Tensor& b0) {
  const Tensor a = autograd::autocast_to_lower(a0), b = autograd::autocast_to_lower(b0);
  // Composed of differentiable views and products, so gradients follow from theirs.
  if (!autograd::any_requires_grad({&a, &b})) return native::matmul(a, b);
  if (a.dim() == 2 && b.dim() == 2) return mm(a, b);
  if (a.dim() == 1 && b.dim() == 1) return reshape(mm(unsqueeze(a, 0), unsqueeze(b, 1)), {});
  if (a.dim() == 2 && b.dim() == 1) return squeeze(mm(a, unsqueeze(b, 1)), 1);
  if (a.dim() == 1 && b.dim() == 2) return squeeze(mm(unsqueeze(a, 0), b), 0);
  if (a.dim() >= 3 && b.dim() <= 2) {
    Tensor bb = b.dim() == 1 ? unsqueeze(b, 1) : b;
    IntList out_sizes(a.sizes().begin(), a.sizes().end() - 1);
    if (b.dim() == 2) out_sizes.push_back(b.sizes()[1]);
    return reshape(mm(reshape(a, {-1, a.sizes().back()}), bb), out_sizes);
  }
  Tensor aa = a.dim() == 1 ? unsqueeze(a, 0) : a;
  Tensor bb = b.dim() == 1 ? unsqueeze(b, 1) : b;
  IntList ba(aa.sizes().begin(), aa.sizes().end() - 2), bbs(bb.sizes().begin(), bb.sizes().end() - 2);
  IntList batch = native::broadcast_shapes(ba, bbs, "matmul");
  int64_t n = aa.sizes()[aa.dim() - 2], k = aa.sizes().back(), m = bb.sizes().back();
  IntList ea = batch, eb = batch;
  ea.push_back(n); ea.push_back(k);
  eb.push_back(bb.sizes()[bb.dim() - 2]); eb.push_back(m);
  int64_t B = numel_of(batch);
  Tensor r = bmm(reshape(expand(aa, ea), {B, n, k}), reshape(expand(bb, eb), {B, k, m}));
  IntList out_sizes = batch;
  if (a.dim() > 1) out_sizes.push_back(n);
  if (b.dim() > 1) out_sizes.push_back(m);
  return reshape(r, out_sizes);
}

Tensor addmm(const Tensor& bias0, const Tensor& a0, const Tensor& b0, double beta, double alpha) {
  const Tensor bias = autograd::autocast_to_lower(bias0), a = autograd::autocast_to_lower(a0),
               b = autograd::autocast_to_lower(b0);
  Tensor out = native::addmm(bias, a, b, beta, alpha);
  if (autograd::any_requires_grad({&bias, &a, &b})) {
    SavedVariable sa(b.requires_grad() ? a : Tensor()), sb(a.requires_grad() ? b : Tensor());
    record("AddmmBackward0", {&bias, &a, &b}, {&out},
           [sa, sb, mbias = InputMeta(bias), beta, alpha](FunctionNode& n, TensorList& g) {
             TensorList r(3);
             if (n.needs_input_grad(0)) r[0] = reduce_grad(beta == 1.0 ? g[0] : native::mul(g[0], beta), mbias);
             Tensor ga = alpha == 1.0 ? g[0] : native::mul(g[0], alpha);
             if (n.needs_input_grad(1)) r[1] = native::mm(ga, native::t(sb.unpack("AddmmBackward0")));
             if (n.needs_input_grad(2)) r[2] = native::mm(native::t(sa.unpack("AddmmBackward0")), ga);
             return r;
           });
  }
  return out;
}

Tensor linear(const Tensor& x0, const Tensor& weight0, const Tensor& bias0) {
  const Tensor x = autograd::autocast_to_lower(x0), weight = autograd::autocast_to_lower(weight0),
               bias = autograd::autocast_to_lower(bias0);
  EMBER_CHECK_T(ValueError, weight.dim() == 2, "linear: expected weight of shape [out_features, in_features], got ",
                weight.sizes());
  EMBER_CHECK_T(ValueError, x.dim() >= 1 && x.sizes().back() == weight.sizes()[1], "linear: input has ",
                x.dim() ? x.sizes().back() : 0, " features in its last dimension (shape ", x.sizes(),
                ") but the weight expects ", weight.sizes()[1], " (weight shape ", weight.sizes(), ")");
  IntList out_sizes(x.sizes().begin(), x.sizes().end() - 1);
  out_sizes.push_back(weight.sizes()[0]);
  Tensor x2 = x.dim() == 2 ? x : reshape(x, {-1, x.sizes().back()});
  Tensor y = bias.defined() ? addmm(bias, x2, t(weight)) : mm(x2, t(weight));
  return x.dim() == 2 ? y : reshape(y, out_sizes);
}

}  // namespace ember
