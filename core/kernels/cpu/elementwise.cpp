#include "core/kernels/cpu/elementwise.h"

#include <cstring>
#include <type_traits>

#include "core/kernels/cpu/loops.h"

namespace ember::kernels::cpu {

void binary_kernel(BinaryOp op, double alpha, DType dtype, const ElementwisePlan& plan, const char* name) {
  auto run = [&]<typename T>() {
    visit_binary<T>(op, alpha, [&](auto f) {
      using Out = decltype(f(T{}, T{}));
      cpu_kernel<Out, T, T>(plan, f);
    });
  };
  switch (dtype) {
    case kFloat32: return run.template operator()<float>();
    case kFloat64: return run.template operator()<double>();
    case kInt64: return run.template operator()<int64_t>();
    case kInt32: return run.template operator()<int32_t>();
    case kBool:
      EMBER_CHECK_T(TypeError, binary_op_returns_bool(op) || op == BinaryOp::kMaximum || op == BinaryOp::kMinimum ||
                                   op == BinaryOp::kMul,
                    name, ": not supported for bool tensors");
      return run.template operator()<bool>();
    default:
      EMBER_THROW(TypeError, name, ": CPU kernels support float32, float64, int64, int32 and bool, got ", dtype,
                  " (convert with to(kFloat32) first)");
  }
}

void unary_kernel(UnaryOp op, double a, double b, DType dtype, const ElementwisePlan& plan, const char* name) {
  auto run = [&]<typename T>() {
    if (unary_op_returns_bool(op)) {
      cpu_kernel<bool, T>(plan, BoolUnaryF<T>{op, a});
    } else if constexpr (std::is_floating_point_v<T>) {
      visit_float_unary<T>(op, a, b, [&](auto f) { cpu_kernel<T, T>(plan, f); });
    } else {
      cpu_kernel<T, T>(plan, UnaryF<T>{op, a, b});
    }
  };
  switch (dtype) {
    case kFloat32: return run.template operator()<float>();
    case kFloat64: return run.template operator()<double>();
    case kInt64: return run.template operator()<int64_t>();
    case kInt32: return run.template operator()<int32_t>();
    case kBool: return run.template operator()<bool>();
    default:
      EMBER_THROW(TypeError, name, ": CPU kernels support float32, float64, int64, int32 and bool, got ", dtype,
                  " (convert with to(kFloat32) first)");
  }
}

namespace {
template <template <typename> class F>
void ternary_same(const ElementwisePlan& plan, DType dtype, double v, const char* name) {
  EMBER_DISPATCH_NUMERIC(dtype, name, [&] { cpu_kernel<scalar_t, scalar_t, scalar_t, scalar_t>(plan, F<scalar_t>{v}); });
}
}  // namespace

void ternary_kernel(TernaryOp op, double value, DType dtype, const ElementwisePlan& plan, const char* name) {
  switch (op) {
    case TernaryOp::kWhere:
      EMBER_DISPATCH_ALL(dtype, name, [&] {
        if constexpr (sizeof(scalar_t) == 2) {
          EMBER_THROW(TypeError, name, ": 16-bit floats are not supported on CPU");
        } else {
          cpu_kernel<scalar_t, bool, scalar_t, scalar_t>(plan, WhereF<scalar_t>{});
        }
      });
      return;
    case TernaryOp::kMaskedFill:
      EMBER_DISPATCH_ALL(dtype, name, [&] {
        if constexpr (sizeof(scalar_t) == 2) {
          EMBER_THROW(TypeError, name, ": 16-bit floats are not supported on CPU");
        } else {
          cpu_kernel<scalar_t, scalar_t, bool>(plan, MaskedFillF<scalar_t>{value});
        }
      });
      return;
    case TernaryOp::kAddcmul: return ternary_same<AddcmulF>(plan, dtype, value, name);
    case TernaryOp::kAddcdiv: return ternary_same<AddcdivF>(plan, dtype, value, name);
    case TernaryOp::kLerp:
      EMBER_DISPATCH_FLOATING(dtype, name, [&] { cpu_kernel<scalar_t, scalar_t, scalar_t>(plan, LerpF<scalar_t>{value}); });
      return;
  }
  EMBER_INTERNAL_ASSERT(false, "unknown TernaryOp");
}

void cast_kernel(DType to, DType from, const ElementwisePlan& plan) {
  const int64_t es = static_cast<int64_t>(element_size(to));
  if (to == from && plan.ndim == 1 && plan.strides[0][0] == es && plan.strides[1][0] == es) {
    if (plan.numel > 0) std::memcpy(plan.data[0], plan.data[1], static_cast<size_t>(plan.numel * es));
    return;
  }
  EMBER_DISPATCH_ALL(to, "copy_", [&] {
    using To = scalar_t;
    EMBER_DISPATCH_ALL(from, "copy_", [&] { cpu_kernel<To, scalar_t>(plan, CastF<To, scalar_t>{}); });
  });
}

}  // namespace ember::kernels::cpu
