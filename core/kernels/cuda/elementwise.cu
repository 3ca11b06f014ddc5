// CUDA kernels of the element-wise stubs (core/ops/elementwise_stubs.h): dtype dispatch onto the
// functors of core/kernels/elementwise.h, driven by cuda_kernel (loops.cuh). No op's formula
// lives here. Each entry makes the plan's device current.
#include <type_traits>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_device.h"
#include "core/cuda/cuda_stream.h"
#include "core/kernels/cuda/kernels.h"
#include "core/kernels/cuda/loops.cuh"

namespace ember::cuda {
namespace {
using kernels::BinaryOp;
using kernels::TernaryOp;
using kernels::UnaryOp;

template <typename T>
constexpr bool is_float_v = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

const char* binary_op_name(BinaryOp op) {
  static const char* const kNames[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum",
                                       "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
                                       "tanh_backward", "sigmoid_backward", "relu_backward", "gelu_backward"};
  const int i = static_cast<int>(op);
  return i >= 0 && i < static_cast<int>(sizeof(kNames) / sizeof(kNames[0])) ? kNames[i] : "binary op";
}

template <typename T>
void binary_typed(BinaryOp op, double alpha, const kernels::ElementwisePlan& plan) {
  kernels::visit_binary<T>(op, alpha, [&](auto f) {
    using Out = decltype(f(T{}, T{}));
    cuda_kernel<Out, T, T>(plan, f, binary_op_name(op));
  });
}

template <typename T>
void unary_typed(UnaryOp op, double a, double b, const kernels::ElementwisePlan& plan) {
  if (kernels::unary_op_returns_bool(op)) {
    cuda_kernel<bool, T>(plan, kernels::BoolUnaryF<T>{op, a}, "unary");
  } else if constexpr (is_float_v<T>) {
    cuda_kernel<T, T>(plan, kernels::FloatUnaryF<T>{op, a, b}, "unary");
  } else {
    cuda_kernel<T, T>(plan, kernels::UnaryF<T>{op, a, b}, "unary");
  }
}

void launch_binary(BinaryOp op, double alpha, DType dtype, const kernels::ElementwisePlan& plan) {
  // The CPU path's rule: bool tensors only compare, combine logically, multiply, max and min.
  EMBER_CHECK_T(TypeError,
                dtype != kBool || kernels::binary_op_returns_bool(op) || op == BinaryOp::kMaximum ||
                    op == BinaryOp::kMinimum || op == BinaryOp::kMul,
                binary_op_name(op), ": not supported for bool tensors");
  EMBER_DISPATCH_ALL(dtype, binary_op_name(op), [&] { binary_typed<scalar_t>(op, alpha, plan); });
}

void launch_unary(UnaryOp op, double a, double b, DType dtype, const kernels::ElementwisePlan& plan) {
  EMBER_DISPATCH_ALL(dtype, "unary op", [&] { unary_typed<scalar_t>(op, a, b, plan); });
}

void launch_ternary(TernaryOp op, double value, DType dtype, const kernels::ElementwisePlan& plan) {
  switch (op) {
    case TernaryOp::kWhere:
      EMBER_DISPATCH_ALL(dtype, "where", [&] {
        cuda_kernel<scalar_t, bool, scalar_t, scalar_t>(plan, kernels::WhereF<scalar_t>{}, "where");
      });
      return;
    case TernaryOp::kMaskedFill:
      EMBER_DISPATCH_ALL(dtype, "masked_fill_", [&] {
        cuda_kernel<scalar_t, scalar_t, bool>(plan, kernels::MaskedFillF<scalar_t>{value}, "masked_fill_");
      });
      return;
    case TernaryOp::kAddcmul:
    case TernaryOp::kAddcdiv: {
      const char* name = op == TernaryOp::kAddcmul ? "addcmul_" : "addcdiv_";
      EMBER_CHECK_T(TypeError, dtype != kBool, name, ": expected a numeric dtype, got ", dtype);
      EMBER_DISPATCH_ALL(dtype, name, [&] {
        if constexpr (!std::is_same_v<scalar_t, bool>) {
          if (op == TernaryOp::kAddcmul) {
            cuda_kernel<scalar_t, scalar_t, scalar_t, scalar_t>(plan, kernels::AddcmulF<scalar_t>{value}, "addcmul_");
          } else {
            cuda_kernel<scalar_t, scalar_t, scalar_t, scalar_t>(plan, kernels::AddcdivF<scalar_t>{value}, "addcdiv_");
          }
        }
      });
      return;
    }
    case TernaryOp::kLerp:
      EMBER_CHECK_T(TypeError, is_floating_point(dtype), "lerp_: expected a floating-point dtype, got ", dtype);
      EMBER_DISPATCH_ALL(dtype, "lerp_", [&] {
        if constexpr (is_float_v<scalar_t>) {
          cuda_kernel<scalar_t, scalar_t, scalar_t>(plan, kernels::LerpF<scalar_t>{value}, "lerp_");
        }
      });
      return;
  }
  EMBER_INTERNAL_ASSERT(false, "unknown TernaryOp");
}

}  // namespace

void binary(BinaryOp op, double alpha, DType dtype, const kernels::ElementwisePlan& plan, const char* /*name*/) {
  if (plan.numel == 0) return;
  CudaDeviceGuard guard(plan.device_index);
  launch_binary(op, alpha, dtype, plan);
}

void unary(UnaryOp op, double a, double b, DType dtype, const kernels::ElementwisePlan& plan, const char* /*name*/) {
  if (plan.numel == 0) return;
  CudaDeviceGuard guard(plan.device_index);
  launch_unary(op, a, b, dtype, plan);
}

void ternary(TernaryOp op, double value, DType dtype, const kernels::ElementwisePlan& plan, const char* /*name*/) {
  if (plan.numel == 0) return;
  CudaDeviceGuard guard(plan.device_index);
  launch_ternary(op, value, dtype, plan);
}

void cast(DType to, DType from, const kernels::ElementwisePlan& plan) {
  if (plan.numel == 0) return;
  CudaDeviceGuard guard(plan.device_index);
  const int64_t es = static_cast<int64_t>(element_size(to));
  if (to == from && plan.ndim == 1 && plan.strides[0][0] == es && plan.strides[1][0] == es) {
    // A dense same-dtype copy on one device.
    EMBER_CUDA_CHECK(cudaMemcpyAsync(plan.data[0], plan.data[1], static_cast<size_t>(plan.numel * es),
                                     cudaMemcpyDeviceToDevice, current_stream(plan.device_index)));
    return;
  }
  EMBER_DISPATCH_ALL(to, "copy_", [&] {
    using To = scalar_t;
    EMBER_DISPATCH_ALL(from, "copy_", [&] { cuda_kernel<To, scalar_t>(plan, kernels::CastF<To, scalar_t>{}, "copy_"); });
  });
}

}  // namespace ember::cuda
