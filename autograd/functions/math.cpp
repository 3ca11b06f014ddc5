// Differentiable element-wise ops, conversions and in-place ops.
#include "autograd/autocast.h"
#include "autograd/functions/detail.h"

namespace ember {

namespace autograd::detail {

void check_inplace(const Tensor& self, const char* op) {
  // See Note [Inference tensors] in autograd/inference_mode.h.
  EMBER_CHECK(!self.is_inference() || InferenceModeState::is_enabled(), op,
              ": in-place update to an inference tensor outside InferenceMode is not allowed (clone() it first)");
  if (!GradMode::is_enabled()) return;
  if (self.requires_grad() && self.is_leaf()) {
    EMBER_THROW(Error, op, ": a leaf Variable that requires grad is being used in an in-place operation.");
  }
  if (self.impl()->is_view && self.impl()->view_base && self.impl()->view_base->autograd &&
      self.impl()->view_base->autograd->requires_grad) {
    EMBER_THROW(Error, op, ": in-place operations on views of tensors that require grad are not supported by ember; "
                "use the out-of-place op (or clone() the view first)");
  }
}

void rebase_history(Tensor& self, const std::shared_ptr<FunctionNode>& node) {
  auto& m = self.ensure_autograd_meta();
  m.requires_grad = true;
  m.grad_fn = node;
  m.output_nr = 0;
  node->add_output(self);
  node->set_device(self.device());
}

TensorList route_by_mask(const FunctionNode& n, const Tensor& pick_a, const Tensor& g, const InputMeta& ma,
                         const InputMeta& mb) {
  const Tensor zero = zeros_like(g);
  TensorList r(2);
  if (n.needs_input_grad(0)) r[0] = reduce_grad(native::where(pick_a, g, zero), ma);
  if (n.needs_input_grad(1)) r[1] = reduce_grad(native::where(pick_a, zero, g), mb);
  return r;
}

}  // namespace autograd::detail

// ---- binary ------------------------------------------------------------------------------------

Tensor add(const Tensor& a, const Tensor& b, double alpha) {
  Tensor out = native::add(a, b, alpha);
  record("AddBackward0", {&a, &b}, {&out}, [ma = InputMeta(a), mb = InputMeta(b), alpha](FunctionNode& n, TensorList& g) {
    TensorList r(2);
    if (n.needs_input_grad(0)) r[0] = reduce_grad(g[0], ma);
    if (n.needs_input_grad(1)) r[1] = reduce_grad(alpha == 1.0 ? g[0] : native::mul(g[0], alpha), mb);
    return r;
  });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b, double alpha) {
  Tensor out = native::sub(a, b, alpha);
  record("SubBackward0", {&a, &b}, {&out}, [ma = InputMeta(a), mb = InputMeta(b), alpha](FunctionNode& n, TensorList& g) {
    TensorList r(2);
    if (n.needs_input_grad(0)) r[0] = reduce_grad(g[0], ma);
    if (n.needs_input_grad(1)) r[1] = reduce_grad(native::mul(g[0], -alpha), mb);
    return r;
  });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = native::mul(a, b);
  if (autograd::any_requires_grad({&a, &b})) {
    SavedVariable sa(b.requires_grad() ? a : Tensor()), sb(a.requires_grad() ? b : Tensor());
    record("MulBackward0", {&a, &b}, {&out},
           [sa, sb, ma = InputMeta(a), mb = InputMeta(b)](FunctionNode& n, TensorList& g) {
             TensorList r(2);
             if (n.needs_input_grad(0)) r[0] = reduce_grad(native::mul(g[0], sb.unpack("MulBackward0")), ma);
             if (n.needs_input_grad(1)) r[1] = reduce_grad(native::mul(g[0], sa.unpack("MulBackward0")), mb);
             return r;
           });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = native::div(a, b);
  if (autograd::any_requires_grad({&a, &b})) {
    SavedVariable sa(b.requires_grad() ? a : Tensor()), sb(b);
    record("DivBackward0", {&a, &b}, {&out},
           [sa, sb, ma = InputMeta(a), mb = InputMeta(b)](FunctionNode& n, TensorList& g) {
             TensorList r(2);
             Tensor bv = sb.unpack("DivBackward0");
             if (n.needs_input_grad(0)) r[0] = reduce_grad(native::div(g[0], bv), ma);
             if (n.needs_input_grad(1)) {
               // -g * a / b^2
               Tensor av = sa.unpack("DivBackward0");
               r[1] = reduce_grad(native::neg(native::div(native::mul(g[0], av), native::mul(bv, bv))), mb);
             }
             return r;
           });
  }
  return out;
}

Tensor pow(const Tensor& a0, const Tensor& e0) {
  const Tensor a = autograd::autocast_to_float32(a0), e = autograd::autocast_to_float32(e0);
  Tensor out = native::pow(a, e);
  if (autograd::any_requires_grad({&a, &e})) {
    SavedVariable sa(a), se(e), so(out);
    record("PowBackward1", {&a, &e}, {&out},
           [sa, se, so, ma = InputMeta(a), me = InputMeta(e)](FunctionNode& n, TensorList& g) {
             TensorList r(2);
             Tensor av = sa.unpack("PowBackward1"), ev = se.unpack("PowBackward1");
             if (n.needs_input_grad(0)) {
               r[0] = reduce_grad(native::mul(g[0], native::mul(ev, native::pow(av, native::sub(ev, ones_like(ev))))), ma);
             }
             if (n.needs_input_grad(1)) {
               r[1] = reduce_grad(native::mul(g[0], native::mul(so.unpack("PowBackward1"), native::log(av))), me);
             }
             return r;
           });
  }
  return out;
}

namespace {
Tensor minmax_binary(const Tensor& a, const Tensor& b, bool is_max) {
  Tensor out = is_max ? native::maximum(a, b) : native::minimum(a, b);
  if (autograd::any_requires_grad({&a, &b})) {
    SavedVariable sa(a), sb(b);
    record(is_max ? "MaximumBackward0" : "MinimumBackward0", {&a, &b}, {&out},
           [sa, sb, is_max, ma = InputMeta(a), mb = InputMeta(b)](FunctionNode& n, TensorList& g) {
             Tensor av = sa.unpack("MaximumBackward0"), bv = sb.unpack("MaximumBackward0");
             return autograd::detail::route_by_mask(n, is_max ? native::ge(av, bv) : native::le(av, bv), g[0], ma, mb);
           });
  }
  return out;
}
}  // namespace
Tensor maximum(const Tensor& a, const Tensor& b) { return minmax_binary(a, b, true); }
Tensor minimum(const Tensor& a, const Tensor& b) { return minmax_binary(a, b, false); }

// ---- with a scalar ---------------------------------------------------------------------------------

Tensor add(const Tensor& a, double b) {
  Tensor out = native::add(a, b);
  record("AddBackward1", {&a}, {&out}, [ma = InputMeta(a)](FunctionNode&, TensorList& g) {
    return TensorList{reduce_grad(g[0], ma)};
  });
  return out;
}
Tensor sub(const Tensor& a, double b) { return add(a, -b); }
Tensor mul(const Tensor& a, double b) {
  Tensor out = native::mul(a, b);
  record("MulBackward1", {&a}, {&out}, [ma = InputMeta(a), b](FunctionNode&, TensorList& g) {
    return TensorList{reduce_grad(native::mul(g[0], b), ma)};
  });
  return out;
}
Tensor div(const Tensor& a, double b) {
  Tensor out = native::div(a, b);
  record("DivBackward1", {&a}, {&out}, [ma = InputMeta(a), b](FunctionNode&, TensorList& g) {
    return TensorList{reduce_grad(native::div(g[0], b), ma)};
  });
  return out;
}
Tensor rsub(const Tensor& a, double b) {
  Tensor out = native::rsub(a, b);
  record("RsubBackward1", {&a}, {&out}, [ma = InputMeta(a)](FunctionNode&, TensorList& g) {
    return TensorList{reduce_grad(native::neg(g[0]), ma)};
  });
  return out;
}
Tensor pow(const Tensor& a0, double e) {
  const Tensor a = autograd::autocast_to_float32(a0);
  Tensor out = native::pow(a, e);
  if (autograd::any_requires_grad({&a})) {
    SavedVariable sa(a);
    record("PowBackward0", {&a}, {&out}, [sa, e, ma = InputMeta(a)](FunctionNode&, TensorList& g) {
      Tensor av = sa.unpack("PowBackward0");
      Tensor d = e == 2.0 ? native::mul(av, 2.0) : native::mul(native::pow(av, e - 1.0), e);
      return TensorList{reduce_grad(native::mul(g[0], d), ma)};
    });
  }
  return out;
}

// ---- unary ------------------------------------------------------------------------------------------

namespace {
// Unary op whose derivative is a function of what it saves, the input x (Saves::kInput) or
// the output y (Saves::kOutput), passed to bwd(grad, saved).
enum class Saves { kInput, kOutput };
template <Saves kSaves, typename Fwd, typename Bwd>
Tensor unary(const Tensor& a, const char* name, Fwd fwd, Bwd bwd) {
  Tensor out = fwd(a);
  if (autograd::any_requires_grad({&a})) {
    SavedVariable saved(kSaves == Saves::kInput ? a : out);
    record(name, {&a}, {&out}, [saved, name, bwd, ma = InputMeta(a)](FunctionNode&, TensorList& g) {
      return TensorList{reduce_grad(bwd(g[0], saved.unpack(name)), ma)};
    });
  }
  return out;
}
template <typename Fwd, typename Bwd>
Tensor unary_x(const Tensor& a, const char* name, Fwd fwd, Bwd bwd) {
  return unary<Saves::kInput>(a, name, fwd, bwd);
}
template <typename Fwd, typename Bwd>
Tensor unary_y(const Tensor& a, const char* name, Fwd fwd, Bwd bwd) {
  return unary<Saves::kOutput>(a, name, fwd, bwd);
}
}  // namespace

Tensor neg(const Tensor& a) {
  Tensor out = native::neg(a);
  record("NegBackward0", {&a}, {&out}, [](FunctionNode&, TensorList& g) { return TensorList{native::neg(g[0])}; });
  return out;
}
Tensor abs(const Tensor& a) {
  return unary_x(a, "AbsBackward0", &native::abs,
                 [](const Tensor& g, const Tensor& x) { return native::mul(g, native::sign(x)); });
}
Tensor exp(const Tensor& a0) {
  const Tensor a = autograd::autocast_to_float32(a0);  // See Note [Autocast op lists]
  return unary_y(a, "ExpBackward0", &native::exp, [](const Tensor& g, const Tensor& y) { return native::mul(g, y); });
}
Tensor log(const Tensor& a0) {
  const Tensor a = autograd::autocast_to_float32(a0);  // See Note [Autocast op lists]
  return unary_x(a, "LogBackward0", &native::log, [](const Tensor& g, const Tensor& x) { return native::div(g, x); });
}
Tensor log1p(const Tensor& a0) {
  const Tensor a = autograd::autocast_to_float32(a0);  // See Note [Autocast op lists]
  return unary_x(a, "Log1PBackward0", &native::log1p,
                 [](const Tensor& g, const Tensor& x) { return native::div(g, native::add(x, 1.0)); });
}
Tensor sqrt(const Tensor& a) {
  return unary_y(a, "SqrtBackward0", &native::sqrt,
                 [](const Tensor& g, const Tensor& y) { return native::div(g, native::mul(y, 2.0)); });
}
Tensor rsqrt(const Tensor& a0) {
  const Tensor a = autograd::autocast_to_float32(a0);  // See Note [Autocast op lists]
  return unary_y(a, "RsqrtBackward0", &native::rsqrt, [](const Tensor& g, const Tensor& y) {
    return native::mul(g, native::mul(native::mul(native::mul(y, y), y), -0.5));
  });
}
Tensor reciprocal(const Tensor& a0) {
  const Tensor a = autograd::autocast_to_float32(a0);  // See Note [Autocast op lists]
  return unary_y(a, "ReciprocalBackward0", &native::reciprocal,
                 [](const Tensor& g, const Tensor& y) { return native::neg(native::mul(g, native::mul(y, y))); });
}
Tensor sin(const Tensor& a) {
  return unary_x(a, "SinBackward0", &native::sin,
                 [](const Tensor& g, const Tensor& x) { return native::mul(g, native::cos(x)); });
}
Tensor cos(const Tensor& a) {
  return unary_x(a, "CosBackward0", &native::cos,
                 [](const Tensor& g, const Tensor& x) { return native::neg(native::mul(g, native::sin(x))); });
}
Tensor tanh(const Tensor& a) { return unary_y(a, "TanhBackward0", &native::tanh, &native::tanh_backward); }
Tensor sigmoid(const Tensor& a) { return unary_y(a, "SigmoidBackward0", &native::sigmoid, &native::sigmoid_backward); }
Tensor relu(const Tensor& a) { return unary_y(a, "ReluBackward0", &native::relu, &native::relu_backward); }
Tensor gelu(const Tensor& a) { return unary_x(a, "GeluBackward0", &native::gelu, &native::gelu_backward); }
Tensor clamp(const Tensor& a, std::optional<double> lo, std::optional<double> hi) {
  return unary_x(a, "ClampBackward1", [&](const Tensor& x) { return native::clamp(x, lo, hi); },
                 [lo, hi](const Tensor& g, const Tensor& x) {
                   Tensor keep = ones(x.sizes(), TensorOptions(kBool).device(x.device()));
                   if (lo) keep = native::logical_and(keep, native::ge(x, *lo));
                   if (hi) keep = native::logical_and(keep, native::le(x, *hi));
                   return native::where(keep, g, zeros_like(g));
                 });
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Tensor out = native::where(cond, a, b);
  if (autograd::any_requires_grad({&a, &b})) {
    SavedVariable sc(cond);
    record("WhereBackward0", {&a, &b}, {&out}, [sc, ma = InputMeta(a), mb = InputMeta(b)](FunctionNode& n, TensorList& g) {
      return autograd::detail::route_by_mask(n, sc.unpack("WhereBackward0"), g[0], ma, mb);
    });
  }
  return out;
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, double value) {
  Tensor out = native::masked_fill(a, mask, value);
  if (autograd::any_requires_grad({&a})) {
    SavedVariable sm(mask);
    record("MaskedFillBackward0", {&a}, {&out}, [sm, ma = InputMeta(a)](FunctionNode&, TensorList& g) {
      return TensorList{reduce_grad(native::masked_fill(g[0], sm.unpack("MaskedFillBackward0"), 0.0), ma)};
    });
  }
  return out;
}

Tensor eq(const Tensor& a, const Tensor& b) { return native::eq(a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return native::ne(a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return native::lt(a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return native::le(a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return native::gt(a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return native::ge(a, b); }

// ---- in place ------------------------------------------------------------------------------------------

Tensor& add_(Tensor& self, const Tensor& other, double alpha) {
  autograd::detail::check_inplace(self, "add_");
  bool track = autograd::any_requires_grad({&self, &other});
  autograd::Edge prev = track ? autograd::gradient_edge(self) : autograd::Edge{};
  native::add_(self, other, alpha);
  if (track) {
    auto node = std::make_shared<FunctionNode>("AddBackward0", [mo = InputMeta(other), alpha](FunctionNode& n, TensorList& g) {
      TensorList r(2);
      if (n.needs_input_grad(0)) r[0] = g[0];
      if (n.needs_input_grad(1)) r[1] = reduce_grad(alpha == 1.0 ? g[0] : native::mul(g[0], alpha), mo);
      return r;
    });
    node->mutable_next_edges() = {prev, autograd::gradient_edge(other)};
    autograd::detail::rebase_history(self, node);
  }
  return self;
}

Tensor& mul_(Tensor& self, double value) {
  autograd::detail::check_inplace(self, "mul_");
  bool track = autograd::any_requires_grad({&self});
  autograd::Edge prev = track ? autograd::gradient_edge(self) : autograd::Edge{};
  native::mul_(self, value);
  if (track) {
    auto node = std::make_shared<FunctionNode>("MulBackward1", [value](FunctionNode&, TensorList& g) {
      return TensorList{native::mul(g[0], value)};
    });
    node->mutable_next_edges() = {prev};
    autograd::detail::rebase_history(self, node);
  }
  return self;
}

Tensor& mul_(Tensor& self, const Tensor& other) {
  autograd::detail::check_inplace(self, "mul_");
  EMBER_CHECK(!autograd::any_requires_grad({&self, &other}),
              "mul_: in-place multiplication by a tensor is not differentiable in ember; use mul()");
  native::mul_(self, other);
  return self;
}

Tensor& zero_(Tensor& self) {
  autograd::detail::check_inplace(self, "zero_");
  native::zero_(self);
  if (self.requires_grad() && autograd::GradMode::is_enabled()) {
    auto node = std::make_shared<FunctionNode>("ZeroBackward0", [](FunctionNode&, TensorList&) { return TensorList{Tensor()}; });
    node->mutable_next_edges() = {autograd::Edge{}};
    autograd::detail::rebase_history(self, node);
  }
  return self;
}
Tensor& fill_(Tensor& self, double value) {
  autograd::detail::check_inplace(self, "fill_");
  native::fill_(self, value);
  return self;
}
Tensor& copy_(Tensor& self, const Tensor& src, bool non_blocking) {
  autograd::detail::check_inplace(self, "copy_");
  bool track = autograd::any_requires_grad({&src});
  native::copy_(self, src, non_blocking);
  if (track) {
    auto node = std::make_shared<FunctionNode>("CopyBackwards", [ms = InputMeta(src)](FunctionNode&, TensorList& g) {
      Tensor moved = native::to(g[0], ms.device, ms.dtype);
      return TensorList{Tensor(), moved.sizes() == ms.sizes ? moved : native::sum_to_size(moved, ms.sizes)};
    });
    node->mutable_next_edges() = {autograd::Edge{}, autograd::gradient_edge(src)};
    autograd::detail::rebase_history(self, node);
  }
  return self;
}
Tensor& masked_fill_(Tensor& self, const Tensor& mask, double value) {
  autograd::detail::check_inplace(self, "masked_fill_");
  bool track = autograd::any_requires_grad({&self});
  autograd::Edge prev = track ? autograd::gradient_edge(self) : autograd::Edge{};
  native::masked_fill_(self, mask, value);
  if (track) {
    SavedVariable sm(mask);
    auto node = std::make_shared<FunctionNode>("MaskedFillBackward0", [sm](FunctionNode&, TensorList& g) {
      return TensorList{native::masked_fill(g[0], sm.unpack("MaskedFillBackward0"), 0.0)};
    });
    node->mutable_next_edges() = {prev};
    autograd::detail::rebase_history(self, node);
  }
  return self;
}

// ---- conversion ----------------------------------------------------------------------------------------

Tensor to(const Tensor& a, Device device, DType dtype, bool non_blocking) {
  Tensor out = native::to(a, device, dtype, non_blocking);
  if (out.is_same(a)) return a;
  record("ToCopyBackward0", {&a}, {&out}, [ma = InputMeta(a)](FunctionNode&, TensorList& g) {
    return TensorList{native::to(g[0], ma.device, ma.dtype)};
  });
  return out;
}
Tensor to(const Tensor& a, Device device, bool non_blocking) { return to(a, device, a.dtype(), non_blocking); }
Tensor to(const Tensor& a, DType dtype) { return to(a, a.device(), dtype); }

Tensor pin_memory(const Tensor& a) {
  Tensor out = native::pin_memory(a);
  if (out.is_same(a)) return a;
  record("PinMemoryBackward0", {&a}, {&out}, [](FunctionNode&, TensorList& g) { return TensorList{g[0]}; });
  return out;
}

Tensor clone(const Tensor& a) {
  Tensor out = native::clone(a);
  record("CloneBackward0", {&a}, {&out}, [](FunctionNode&, TensorList& g) { return TensorList{g[0]}; });
  return out;
}

Tensor contiguous(const Tensor& a) { return a.is_contiguous() ? a : clone(a); }

Tensor detach(const Tensor& a) {
  EMBER_CHECK(a.defined(), "detach: operation on an undefined Tensor");
  return autograd::alias_without_history(a);
}

}  // namespace ember
