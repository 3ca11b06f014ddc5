// Element-wise ops: argument checks, dtype promotion, output allocation and dispatch through
// the stubs of core/ops/elementwise_stubs.h.
#include "core/ops/elementwise_stubs.h"

#include <algorithm>

#include "core/ops/detail/plan.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember::native {

detail::DispatchStub<BinaryFn> binary_stub;
detail::DispatchStub<UnaryFn> unary_stub;
detail::DispatchStub<TernaryFn> ternary_stub;
detail::DispatchStub<CastFn> cast_stub;

namespace detail {

void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (!first) {
      first = t;
      continue;
    }
    EMBER_CHECK(t->device() == first->device(), op,
                ": expected all tensors to be on the same device, but found at least two devices, ",
                first->device(), " and ", t->device(), "!");
  }
}

kernels::ElementwisePlan make_plan(const Tensor& out, std::initializer_list<const Tensor*> inputs) {
  using kernels::kMaxDims;
  kernels::ElementwisePlan p;
  const auto& osz = out.sizes();
  const int nd = static_cast<int>(osz.size());
  EMBER_CHECK(nd <= kMaxDims, "element-wise op: at most ", kMaxDims, " dimensions are supported, got ", nd);
  p.num_operands = 1 + static_cast<int>(inputs.size());
  p.numel = out.numel();
  p.device_index = out.device().index;
  const Tensor* ops[kernels::kMaxOperands];
  ops[0] = &out;
  int k = 1;
  for (const Tensor* t : inputs) ops[k++] = t;
  int64_t sizes[kMaxDims];
  int64_t strides[kernels::kMaxOperands][kMaxDims];
  for (int d = 0; d < nd; ++d) sizes[d] = osz[d];
  for (int o = 0; o < p.num_operands; ++o) {
    const Tensor& t = *ops[o];
    p.data[o] = static_cast<char*>(t.raw_data());
    const int64_t es = static_cast<int64_t>(t.element_size());
    const int td = static_cast<int>(t.dim());
    for (int d = 0; d < nd; ++d) {
      int sd = d - (nd - td);
      strides[o][d] = (sd < 0 || t.sizes()[sd] == 1) ? 0 : t.strides()[sd] * es;
    }
  }
  // Drop size-1 dims, then merge dim d into d-1 where every operand is contiguous across them.
  int m = 0;
  for (int d = 0; d < nd; ++d) {
    if (sizes[d] == 1) continue;
    if (m > 0) {
      bool mergeable = true;
      for (int o = 0; o < p.num_operands; ++o) {
        if (p.strides[o][m - 1] != strides[o][d] * sizes[d]) { mergeable = false; break; }
      }
      if (mergeable) {
        p.sizes[m - 1] *= sizes[d];
        for (int o = 0; o < p.num_operands; ++o) p.strides[o][m - 1] = strides[o][d];
        continue;
      }
    }
    p.sizes[m] = sizes[d];
    for (int o = 0; o < p.num_operands; ++o) p.strides[o][m] = strides[o][d];
    ++m;
  }
  p.ndim = m;
  if (m == 0 && p.numel == 1) {  // a scalar: one row of one element
    p.ndim = 1;
    p.sizes[0] = 1;
    for (int o = 0; o < p.num_operands; ++o) p.strides[o][0] = 0;
  }
  return p;
}

}  // namespace detail

namespace {
using kernels::BinaryOp;
using kernels::TernaryOp;
using kernels::UnaryOp;

// PyTorch's promotion where 0-dim tensors do not raise the category's width.
DType result_type(const Tensor& a, const Tensor& b) {
  auto cat = [](DType t) { return t == kBool ? 0 : (is_integral(t) ? 1 : 2); };
  bool a0 = a.dim() == 0, b0 = b.dim() == 0;
  if (a0 != b0) {
    const Tensor& dimmed = a0 ? b : a;
    const Tensor& scalar = a0 ? a : b;
    if (cat(scalar.dtype()) <= cat(dimmed.dtype())) return dimmed.dtype();
    return scalar.dtype();
  }
  return promote_types(a.dtype(), b.dtype());
}

// Scalar operand: what dtype does tensor (op) double produce?
DType scalar_result_type(DType t, double s) {
  if (is_integral(t, true) && s != static_cast<double>(static_cast<int64_t>(s))) return kFloat32;
  if (t == kBool) return kInt64;
  return t;
}

Tensor cast_if_needed(const Tensor& t, DType d) { return t.dtype() == d ? t : to(t, d); }

// Note [16-bit floats on CPU]
// The CPU kernels have no bfloat16/float16 bodies. An op computing in one of them on CPU widens
// its operands to float32 (exact), runs the float32 kernel and rounds the result once to the
// 16-bit type (round to nearest even), which is the result a 16-bit kernel computing in float32
// internally gives, as PyTorch's CPU bfloat16 kernels do. Slow (two extra passes), but the
// numbers are those of the 16-bit type; it serves autocast on CPU (autograd/autocast.h).
// Element-wise ops here, reductions (core/ops/reduce.cpp) and matrix products
// (core/ops/linalg.cpp) take this path.
bool cpu_16bit(DType compute, Device device) {
  return device.is_cpu() && (compute == kBFloat16 || compute == kFloat16);
}

void dispatch_binary(BinaryOp op, double alpha, DType compute, const kernels::ElementwisePlan& plan,
                     Device device, const char* name) {
  binary_stub.kernel(device, name)(op, alpha, compute, plan, name);
}

void dispatch_unary(UnaryOp op, double a, double b, DType compute, const kernels::ElementwisePlan& plan,
                    Device device, const char* name) {
  unary_stub.kernel(device, name)(op, a, b, compute, plan, name);
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, double alpha, const char* name) {
  detail::check_same_device(name, {&a, &b});
  IntList shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  DType compute = result_type(a, b);
  if (cpu_16bit(compute, a.device())) {  // See Note [16-bit floats on CPU]
    Tensor r = binary(op, to(a, kFloat32), to(b, kFloat32), alpha, name);
    return r.dtype() == kBool ? r : to(r, compute);
  }
  Tensor ac = cast_if_needed(a, compute), bc = cast_if_needed(b, compute);
  DType out_dtype = kernels::binary_op_returns_bool(op) ? kBool : compute;
  Tensor out = empty(shape, TensorOptions(out_dtype).device(a.device()));
  dispatch_binary(op, alpha, compute, detail::make_plan(out, {&ac, &bc}), a.device(), name);
  return out;
}

Tensor unary(UnaryOp op, const Tensor& a, double s0, double s1, const char* name, DType compute) {
  if (cpu_16bit(compute, a.device())) {  // See Note [16-bit floats on CPU]
    Tensor r = unary(op, to(a, kFloat32), s0, s1, name, kFloat32);
    return r.dtype() == kBool ? r : to(r, compute);
  }
  DType out_dtype = kernels::unary_op_returns_bool(op) ? kBool : compute;
  Tensor ac = cast_if_needed(a, compute);
  Tensor out = empty(a.sizes(), TensorOptions(out_dtype).device(a.device()));
  dispatch_unary(op, s0, s1, compute, detail::make_plan(out, {&ac}), a.device(), name);
  return out;
}

DType float_compute(const Tensor& a) { return is_floating_point(a.dtype()) ? a.dtype() : kFloat32; }

Tensor unary_float(UnaryOp op, const Tensor& a, const char* name) { return unary(op, a, 0, 0, name, float_compute(a)); }
Tensor unary_same(UnaryOp op, const Tensor& a, const char* name, double s0 = 0, double s1 = 0) {
  return unary(op, a, s0, s1, name, a.dtype());
}
Tensor unary_scalar(UnaryOp op, const Tensor& a, double s, const char* name) {
  return unary(op, a, s, 0, name, scalar_result_type(a.dtype(), s));
}

void check_inplace_shape(const char* name, const Tensor& self, const Tensor& other) {
  IntList shape = broadcast_shapes(self.sizes(), other.sizes(), name);
  EMBER_CHECK(shape == self.sizes(), name, ": output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", shape);
}

// PyTorch's can_cast: a result may be written into self unless that lowers its category (float ->
// integer, integer -> bool); within a category (float64 into float32, int64 into int32) it may.
void check_inplace_dtype(const char* name, const Tensor& self, DType result) {
  auto cat = [](DType t) { return t == kBool ? 0 : (is_integral(t) ? 1 : 2); };
  EMBER_CHECK_T(TypeError, cat(result) <= cat(self.dtype()), name, ": result type ", result,
                " can't be cast to the desired output type ", self.dtype());
}

Tensor& binary_(BinaryOp op, Tensor& self, const Tensor& other, double alpha, const char* name) {
  detail::check_same_device(name, {&self, &other});
  check_inplace_shape(name, self, other);
  check_inplace_dtype(name, self, result_type(self, other));
  if (cpu_16bit(self.dtype(), self.device())) {  // See Note [16-bit floats on CPU]
    Tensor wide = to(self, kFloat32);
    binary_(op, wide, to(other, kFloat32), alpha, name);
    return copy_(self, wide);
  }
  Tensor oc = cast_if_needed(other, self.dtype());
  dispatch_binary(op, alpha, self.dtype(), detail::make_plan(self, {&self, &oc}), self.device(), name);
  self.bump_version();
  return self;
}

Tensor& unary_(UnaryOp op, Tensor& self, double s0, double s1, const char* name) {
  if (cpu_16bit(self.dtype(), self.device())) {  // See Note [16-bit floats on CPU]
    Tensor wide = to(self, kFloat32);
    unary_(op, wide, s0, s1, name);
    return copy_(self, wide);
  }
  dispatch_unary(op, s0, s1, self.dtype(), detail::make_plan(self, {&self}), self.device(), name);
  self.bump_version();
  return self;
}

}  // namespace

IntList broadcast_shapes(const IntList& a, const IntList& b, const char* op) {
  if (a == b) return a;
  size_t n = std::max(a.size(), b.size());
  IntList out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    EMBER_CHECK_T(ValueError, da == db || da == 1 || db == 1, op, ": the size of tensor a (", da,
                  ") must match the size of tensor b (", db, ") at non-singleton dimension ", i,
                  " (shapes ", a, " and ", b, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor add(const Tensor& a, const Tensor& b, double alpha) { return binary(BinaryOp::kAdd, a, b, alpha, "add"); }
Tensor sub(const Tensor& a, const Tensor& b, double alpha) { return binary(BinaryOp::kSub, a, b, alpha, "sub"); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kMul, a, b, 1, "mul"); }
Tensor div(const Tensor& a, const Tensor& b) {
  if (!is_floating_point(a.dtype()) && !is_floating_point(b.dtype())) return div(to(a, kFloat32), to(b, kFloat32));
  return binary(BinaryOp::kDiv, a, b, 1, "div");
}
Tensor pow(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kPow, a, b, 1, "pow"); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kMaximum, a, b, 1, "maximum"); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kMinimum, a, b, 1, "minimum"); }
Tensor eq(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kEq, a, b, 1, "eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kNe, a, b, 1, "ne"); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kLt, a, b, 1, "lt"); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kLe, a, b, 1, "le"); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kGt, a, b, 1, "gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(BinaryOp::kGe, a, b, 1, "ge"); }
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::kLogicalAnd, to(a, kBool), to(b, kBool), 1, "logical_and");
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::kLogicalOr, to(a, kBool), to(b, kBool), 1, "logical_or");
}
Tensor tanh_backward(const Tensor& g, const Tensor& y) { return binary(BinaryOp::kTanhBackward, g, y, 1, "tanh_backward"); }
Tensor sigmoid_backward(const Tensor& g, const Tensor& y) {
  return binary(BinaryOp::kSigmoidBackward, g, y, 1, "sigmoid_backward");
}
Tensor relu_backward(const Tensor& g, const Tensor& x) { return binary(BinaryOp::kReluBackward, g, x, 1, "relu_backward"); }
Tensor gelu_backward(const Tensor& g, const Tensor& x) { return binary(BinaryOp::kGeluBackward, g, x, 1, "gelu_backward"); }

Tensor add(const Tensor& a, double b) { return unary_scalar(UnaryOp::kAddScalar, a, b, "add"); }
Tensor mul(const Tensor& a, double b) { return unary_scalar(UnaryOp::kMulScalar, a, b, "mul"); }
Tensor div(const Tensor& a, double b) { return unary(UnaryOp::kDivScalar, a, b, 0, "div", float_compute(a)); }
Tensor rsub(const Tensor& a, double b) { return unary_scalar(UnaryOp::kRSubScalar, a, b, "rsub"); }
Tensor pow(const Tensor& a, double e) {
  if (e == 2.0) return mul(a, a);
  if (e == 1.0) return clone(a);
  return unary(UnaryOp::kPowScalar, a, e, 0, "pow", float_compute(a));
}
Tensor eq(const Tensor& a, double b) { return unary_same(UnaryOp::kEqScalar, a, "eq", b); }
Tensor ne(const Tensor& a, double b) { return unary_same(UnaryOp::kNeScalar, a, "ne", b); }
Tensor lt(const Tensor& a, double b) { return unary_same(UnaryOp::kLtScalar, a, "lt", b); }
Tensor le(const Tensor& a, double b) { return unary_same(UnaryOp::kLeScalar, a, "le", b); }
Tensor gt(const Tensor& a, double b) { return unary_same(UnaryOp::kGtScalar, a, "gt", b); }
Tensor ge(const Tensor& a, double b) { return unary_same(UnaryOp::kGeScalar, a, "ge", b); }
Tensor logical_not(const Tensor& a) { return unary_same(UnaryOp::kLogicalNot, a, "logical_not"); }

Tensor neg(const Tensor& a) {
  EMBER_CHECK_T(TypeError, a.dtype() != kBool, "neg: negation, the `-` operator, on a bool tensor is not supported. "
                "If you are trying to invert a mask, use logical_not() instead.");
  return unary_same(UnaryOp::kNeg, a, "neg");
}
Tensor abs(const Tensor& a) { return unary_same(UnaryOp::kAbs, a, "abs"); }
Tensor sign(const Tensor& a) { return unary_same(UnaryOp::kSign, a, "sign"); }
Tensor relu(const Tensor& a) { return unary_same(UnaryOp::kRelu, a, "relu"); }
Tensor exp(const Tensor& a) { return unary_float(UnaryOp::kExp, a, "exp"); }
Tensor log(const Tensor& a) { return unary_float(UnaryOp::kLog, a, "log"); }
Tensor log1p(const Tensor& a) { return unary_float(UnaryOp::kLog1p, a, "log1p"); }
Tensor sqrt(const Tensor& a) { return unary_float(UnaryOp::kSqrt, a, "sqrt"); }
Tensor rsqrt(const Tensor& a) { return unary_float(UnaryOp::kRsqrt, a, "rsqrt"); }
Tensor reciprocal(const Tensor& a) { return unary_float(UnaryOp::kReciprocal, a, "reciprocal"); }
Tensor sin(const Tensor& a) { return unary_float(UnaryOp::kSin, a, "sin"); }
Tensor cos(const Tensor& a) { return unary_float(UnaryOp::kCos, a, "cos"); }
Tensor tanh(const Tensor& a) { return unary_float(UnaryOp::kTanh, a, "tanh"); }
Tensor sigmoid(const Tensor& a) { return unary_float(UnaryOp::kSigmoid, a, "sigmoid"); }
Tensor gelu(const Tensor& a) { return unary_float(UnaryOp::kGelu, a, "gelu"); }
Tensor erf(const Tensor& a) { return unary_float(UnaryOp::kErf, a, "erf"); }
Tensor isnan(const Tensor& a) { return unary_same(UnaryOp::kIsNan, a, "isnan"); }
Tensor isfinite(const Tensor& a) { return unary_same(UnaryOp::kIsFinite, a, "isfinite"); }

Tensor clamp(const Tensor& a, std::optional<double> lo, std::optional<double> hi) {
  EMBER_CHECK_T(ValueError, lo || hi, "clamp: at least one of 'min' or 'max' must not be None");
  if (lo && hi) return unary_same(UnaryOp::kClamp, a, "clamp", *lo, *hi);
  if (lo) return unary_same(UnaryOp::kClampMin, a, "clamp", *lo);
  return unary_same(UnaryOp::kClampMax, a, "clamp", *hi);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  detail::check_same_device("where", {&cond, &a, &b});
  EMBER_CHECK_T(TypeError, cond.dtype() == kBool, "where: expected condition to be a bool tensor, got ", cond.dtype());
  IntList shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(), "where");
  DType dt = result_type(a, b);
  Tensor ac = cast_if_needed(a, dt), bc = cast_if_needed(b, dt);
  Tensor out = empty(shape, TensorOptions(dt).device(a.device()));
  ternary_stub.kernel(out.device(), "where")(TernaryOp::kWhere, 0, dt, detail::make_plan(out, {&cond, &ac, &bc}),
                                             "where");
  return out;
}

Tensor& masked_fill_(Tensor& self, const Tensor& mask, double value) {
  detail::check_same_device("masked_fill_", {&self, &mask});
  EMBER_CHECK_T(TypeError, mask.dtype() == kBool, "masked_fill_: expected a bool mask, got ", mask.dtype());
  check_inplace_shape("masked_fill_", self, mask);
  ternary_stub.kernel(self.device(), "masked_fill_")(TernaryOp::kMaskedFill, value, self.dtype(),
                                                     detail::make_plan(self, {&self, &mask}), "masked_fill_");
  self.bump_version();
  return self;
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, double value) {
  IntList shape = broadcast_shapes(a.sizes(), mask.sizes(), "masked_fill");
  // Always a fresh tensor: an expanded view of `a` can itself be contiguous (e.g. [4] -> [1, 4]).
  Tensor out = clone(shape == a.sizes() ? a : expand(a, shape));
  return masked_fill_(out, mask, value);
}

Tensor& add_(Tensor& self, const Tensor& other, double alpha) { return binary_(BinaryOp::kAdd, self, other, alpha, "add_"); }
Tensor& mul_(Tensor& self, const Tensor& other) { return binary_(BinaryOp::kMul, self, other, 1, "mul_"); }
Tensor& div_(Tensor& self, const Tensor& other) {
  // True division: the result is floating, so integer self is refused (never divided in integers).
  if (!is_floating_point(self.dtype())) check_inplace_dtype("div_", self, float_compute(self));
  return binary_(BinaryOp::kDiv, self, other, 1, "div_");
}
Tensor& add_(Tensor& self, double other) {
  check_inplace_dtype("add_", self, scalar_result_type(self.dtype(), other));
  return unary_(UnaryOp::kAddScalar, self, other, 0, "add_");
}
Tensor& mul_(Tensor& self, double other) {
  check_inplace_dtype("mul_", self, scalar_result_type(self.dtype(), other));
  return unary_(UnaryOp::kMulScalar, self, other, 0, "mul_");
}
Tensor& sqrt_(Tensor& self) {
  EMBER_CHECK_T(TypeError, self.is_floating_point(), "sqrt_: expected a floating-point tensor, got ", self.dtype());
  return unary_(UnaryOp::kSqrt, self, 0, 0, "sqrt_");
}
Tensor& fill_(Tensor& self, double value) {
  if (self.device().is_cpu() && self.is_contiguous()) {
    // Writes without reading the (possibly uninitialized) old values: a bool byte that is not
    // 0 or 1 must never be loaded as a bool.
    EMBER_DISPATCH_ALL(self.dtype(), "fill_", [&] {
      scalar_t v = from_double<scalar_t>(value);
      scalar_t* p = static_cast<scalar_t*>(self.raw_data());
      std::fill(p, p + self.numel(), v);
    });
    self.bump_version();
    return self;
  }
  return unary_(UnaryOp::kFill, self, value, 0, "fill_");
}
Tensor& zero_(Tensor& self) { return fill_(self, 0.0); }
Tensor& clamp_(Tensor& self, std::optional<double> lo, std::optional<double> hi) {
  EMBER_CHECK_T(ValueError, lo || hi, "clamp_: at least one of 'min' or 'max' must not be None");
  if (lo && hi) return unary_(UnaryOp::kClamp, self, *lo, *hi, "clamp_");
  if (lo) return unary_(UnaryOp::kClampMin, self, *lo, 0, "clamp_");
  return unary_(UnaryOp::kClampMax, self, *hi, 0, "clamp_");
}

namespace {
Tensor& ternary_inplace(TernaryOp op, Tensor& self, const Tensor& a, const Tensor& b, double v, const char* name) {
  detail::check_same_device(name, {&self, &a, &b});
  check_inplace_shape(name, self, a);
  check_inplace_shape(name, self, b);
  check_inplace_dtype(name, self, result_type(self, a));
  check_inplace_dtype(name, self, result_type(self, b));
  Tensor ac = cast_if_needed(a, self.dtype()), bc = cast_if_needed(b, self.dtype());
  ternary_stub.kernel(self.device(), name)(op, v, self.dtype(), detail::make_plan(self, {&self, &ac, &bc}), name);
  self.bump_version();
  return self;
}
}  // namespace

Tensor& addcmul_(Tensor& self, const Tensor& a, const Tensor& b, double value) {
  return ternary_inplace(TernaryOp::kAddcmul, self, a, b, value, "addcmul_");
}
Tensor& addcdiv_(Tensor& self, const Tensor& a, const Tensor& b, double value) {
  return ternary_inplace(TernaryOp::kAddcdiv, self, a, b, value, "addcdiv_");
}
Tensor& lerp_(Tensor& self, const Tensor& end, double weight) {
  detail::check_same_device("lerp_", {&self, &end});
  check_inplace_shape("lerp_", self, end);
  Tensor ec = cast_if_needed(end, self.dtype());
  ternary_stub.kernel(self.device(), "lerp_")(TernaryOp::kLerp, weight, self.dtype(),
                                              detail::make_plan(self, {&self, &ec}), "lerp_");
  self.bump_version();
  return self;
}

}  // namespace ember::native
