// The math of every element-wise op, once, as host/device functors, and the visitors that map
// an op id to its functor. The CPU driver (core/kernels/cpu/loops.h) and the CUDA driver
// (core/kernels/cuda/loops.cuh) both call visit_*; neither knows any op's formula.
#pragma once
#include <cstdint>

#include "core/kernels/math.h"
#include "core/macros.h"

namespace ember::kernels {

enum class BinaryOp : int8_t {
  kAdd, kSub, kMul, kDiv, kPow, kMaximum, kMinimum,
  kEq, kNe, kLt, kLe, kGt, kGe, kLogicalAnd, kLogicalOr,
  kTanhBackward, kSigmoidBackward, kReluBackward, kGeluBackward,
};
constexpr bool binary_op_returns_bool(BinaryOp op) {
  return op == BinaryOp::kEq || op == BinaryOp::kNe || op == BinaryOp::kLt || op == BinaryOp::kLe ||
         op == BinaryOp::kGt || op == BinaryOp::kGe || op == BinaryOp::kLogicalAnd || op == BinaryOp::kLogicalOr;
}

enum class UnaryOp : int8_t {
  kNeg, kAbs, kSign, kExp, kLog, kLog1p, kSqrt, kRsqrt, kReciprocal, kSin, kCos, kTanh, kSigmoid, kRelu, kGelu, kErf,
  kIsNan, kIsFinite, kLogicalNot,
  // with scalar parameters a (and b)
  kAddScalar, kMulScalar, kDivScalar, kRSubScalar, kPowScalar, kClamp, kClampMin, kClampMax,
  kEqScalar, kNeScalar, kLtScalar, kLeScalar, kGtScalar, kGeScalar, kFill, kCopy,
};
constexpr bool unary_op_returns_bool(UnaryOp op) {
  return op == UnaryOp::kIsNan || op == UnaryOp::kIsFinite || op == UnaryOp::kLogicalNot ||
         (op >= UnaryOp::kEqScalar && op <= UnaryOp::kGeScalar);
}
constexpr bool unary_op_needs_floating(UnaryOp op) {
  return (op >= UnaryOp::kExp && op <= UnaryOp::kErf && op != UnaryOp::kRelu) || op == UnaryOp::kPowScalar;
}

enum class TernaryOp : int8_t { kWhere, kAddcmul, kAddcdiv, kLerp, kMaskedFill };

#define EMBER_BIN(name, expr)                                       \
  template <typename T>                                             \
  struct name {                                                     \
    double alpha;                                                   \
    EMBER_HOST_DEVICE auto operator()(T a, T b) const { return expr; } \
  };
EMBER_BIN(AddF, static_cast<T>(a + static_cast<T>(alpha) * b))
EMBER_BIN(SubF, static_cast<T>(a - static_cast<T>(alpha) * b))
EMBER_BIN(MulF, static_cast<T>(a * b))
EMBER_BIN(DivF, static_cast<T>(a / b))
EMBER_BIN(PowF, static_cast<T>(k_pow(a, b)))
EMBER_BIN(MaxF, static_cast<T>((a != a) ? a : (a > b ? a : b)))
EMBER_BIN(MinF, static_cast<T>((a != a) ? a : (a < b ? a : b)))
EMBER_BIN(EqF, a == b)
EMBER_BIN(NeF, a != b)
EMBER_BIN(LtF, a < b)
EMBER_BIN(LeF, a <= b)
EMBER_BIN(GtF, a > b)
EMBER_BIN(GeF, a >= b)
EMBER_BIN(AndF, static_cast<bool>(a) && static_cast<bool>(b))
EMBER_BIN(OrF, static_cast<bool>(a) || static_cast<bool>(b))
EMBER_BIN(TanhBwdF, static_cast<T>(a * (T(1) - b * b)))
EMBER_BIN(SigmoidBwdF, static_cast<T>(a * b * (T(1) - b)))
EMBER_BIN(ReluBwdF, static_cast<T>(b > T(0) ? a : T(0)))
EMBER_BIN(GeluBwdF, static_cast<T>(a * (T(0.5) * (T(1) + k_erf(b * T(0.70710678118654752440))) +
                                        b * T(0.39894228040143267794) * k_exp(T(-0.5) * b * b))))
#undef EMBER_BIN

/// Calls v(functor) for `op` instantiated at T. Integral T skips float-only formulas.
template <typename T, typename V>
EMBER_HOST_DEVICE inline void visit_binary(BinaryOp op, double alpha, V&& v) {
  switch (op) {
    case BinaryOp::kAdd: return v(AddF<T>{alpha});
    case BinaryOp::kSub: return v(SubF<T>{alpha});
    case BinaryOp::kMul: return v(MulF<T>{alpha});
    case BinaryOp::kDiv: return v(DivF<T>{alpha});
    case BinaryOp::kPow: return v(PowF<T>{alpha});
    case BinaryOp::kMaximum: return v(MaxF<T>{alpha});
    case BinaryOp::kMinimum: return v(MinF<T>{alpha});
    case BinaryOp::kEq: return v(EqF<T>{alpha});
    case BinaryOp::kNe: return v(NeF<T>{alpha});
    case BinaryOp::kLt: return v(LtF<T>{alpha});
    case BinaryOp::kLe: return v(LeF<T>{alpha});
    case BinaryOp::kGt: return v(GtF<T>{alpha});
    case BinaryOp::kGe: return v(GeF<T>{alpha});
    case BinaryOp::kLogicalAnd: return v(AndF<T>{alpha});
    case BinaryOp::kLogicalOr: return v(OrF<T>{alpha});
    case BinaryOp::kTanhBackward: return v(TanhBwdF<T>{alpha});
    case BinaryOp::kSigmoidBackward: return v(SigmoidBwdF<T>{alpha});
    case BinaryOp::kReluBackward: return v(ReluBwdF<T>{alpha});
    case BinaryOp::kGeluBackward: return v(GeluBwdF<T>{alpha});
  }
}

template <typename T>
struct UnaryF {
  UnaryOp op;
  double a, b;
  EMBER_HOST_DEVICE EMBER_FORCE_INLINE T operator()(T x) const {
    switch (op) {
      case UnaryOp::kNeg: return static_cast<T>(-x);
      case UnaryOp::kAbs: return x < T(0) ? static_cast<T>(-x) : x;
      case UnaryOp::kSign: return static_cast<T>((x > T(0)) - (x < T(0)));
      case UnaryOp::kRelu: return (x != x || x > T(0)) ? x : T(0);  // NaN propagates
      case UnaryOp::kAddScalar: return static_cast<T>(x + static_cast<T>(a));
      case UnaryOp::kMulScalar: return static_cast<T>(x * static_cast<T>(a));
      case UnaryOp::kDivScalar: return static_cast<T>(x / static_cast<T>(a));
      case UnaryOp::kRSubScalar: return static_cast<T>(static_cast<T>(a) - x);
      case UnaryOp::kClamp: {  // min(max(x, lo), hi): hi wins when lo > hi, NaN propagates
        T t = x < static_cast<T>(a) ? static_cast<T>(a) : x;
        return t > static_cast<T>(b) ? static_cast<T>(b) : t;
      }
      case UnaryOp::kClampMin: return x < static_cast<T>(a) ? static_cast<T>(a) : x;
      case UnaryOp::kClampMax: return x > static_cast<T>(a) ? static_cast<T>(a) : x;
      case UnaryOp::kFill: return static_cast<T>(a);
      case UnaryOp::kCopy: return x;
      default: return x;
    }
  }
};

template <typename T>
struct FloatUnaryF {
  UnaryOp op;
  double a, b;
  EMBER_HOST_DEVICE EMBER_FORCE_INLINE T operator()(T x) const {
    switch (op) {
      case UnaryOp::kExp: return k_exp(x);
      case UnaryOp::kLog: return k_log(x);
      case UnaryOp::kLog1p: return k_log1p(x);
      case UnaryOp::kSqrt: return k_sqrt(x);
      case UnaryOp::kRsqrt: return T(1) / k_sqrt(x);
      case UnaryOp::kReciprocal: return T(1) / x;
      case UnaryOp::kSin: return k_sin(x);
      case UnaryOp::kCos: return k_cos(x);
      case UnaryOp::kTanh: return k_tanh(x);
      case UnaryOp::kSigmoid: return T(1) / (T(1) + k_exp(-x));
      case UnaryOp::kGelu: return T(0.5) * x * (T(1) + k_erf(x * T(0.70710678118654752440)));
      case UnaryOp::kErf: return k_erf(x);
      case UnaryOp::kPowScalar: return k_pow(x, static_cast<T>(a));
      default: return UnaryF<T>{op, a, b}(x);
    }
  }
};

/// FloatUnaryF with its op fixed at compile time: once inlined the switch folds away, so the
/// CPU driver's dense loop runs one formula and vectorizes (a runtime switch per element kept
/// mul_(scalar) at ~2 ns per float).
template <typename T, UnaryOp Op>
struct FixedFloatUnaryF {
  double a, b;
  EMBER_HOST_DEVICE T operator()(T x) const { return FloatUnaryF<T>{Op, a, b}(x); }
};

/// Calls v(FixedFloatUnaryF<T, op>) for a floating T and an op that returns T (not the bool ops).
template <typename T, typename V>
inline void visit_float_unary(UnaryOp op, double a, double b, V&& v) {
#define EMBER_FIXED_UNARY(name) \
  case UnaryOp::k##name:        \
    return v(FixedFloatUnaryF<T, UnaryOp::k##name>{a, b});
  switch (op) {
    EMBER_FIXED_UNARY(Neg) EMBER_FIXED_UNARY(Abs) EMBER_FIXED_UNARY(Sign) EMBER_FIXED_UNARY(Exp)
    EMBER_FIXED_UNARY(Log) EMBER_FIXED_UNARY(Log1p) EMBER_FIXED_UNARY(Sqrt) EMBER_FIXED_UNARY(Rsqrt)
    EMBER_FIXED_UNARY(Reciprocal) EMBER_FIXED_UNARY(Sin) EMBER_FIXED_UNARY(Cos) EMBER_FIXED_UNARY(Tanh)
    EMBER_FIXED_UNARY(Sigmoid) EMBER_FIXED_UNARY(Relu) EMBER_FIXED_UNARY(Gelu) EMBER_FIXED_UNARY(Erf)
    EMBER_FIXED_UNARY(AddScalar) EMBER_FIXED_UNARY(MulScalar) EMBER_FIXED_UNARY(DivScalar)
    EMBER_FIXED_UNARY(RSubScalar) EMBER_FIXED_UNARY(PowScalar) EMBER_FIXED_UNARY(Clamp)
    EMBER_FIXED_UNARY(ClampMin) EMBER_FIXED_UNARY(ClampMax) EMBER_FIXED_UNARY(Fill) EMBER_FIXED_UNARY(Copy)
    default: return v(FloatUnaryF<T>{op, a, b});  // the bool ops never get here
  }
#undef EMBER_FIXED_UNARY
}

template <typename T>
struct BoolUnaryF {
  UnaryOp op;
  double a;
  EMBER_HOST_DEVICE bool operator()(T x) const {
    switch (op) {
      case UnaryOp::kIsNan: return x != x;
      case UnaryOp::kIsFinite: return x == x && x - x == x - x;
      case UnaryOp::kLogicalNot: return !static_cast<bool>(x);
      case UnaryOp::kEqScalar: return static_cast<double>(x) == a;
      case UnaryOp::kNeScalar: return static_cast<double>(x) != a;
      case UnaryOp::kLtScalar: return static_cast<double>(x) < a;
      case UnaryOp::kLeScalar: return static_cast<double>(x) <= a;
      case UnaryOp::kGtScalar: return static_cast<double>(x) > a;
      case UnaryOp::kGeScalar: return static_cast<double>(x) >= a;
      default: return false;
    }
  }
};

// Ternary functors: (out, in...) types given by the driver.
template <typename T>
struct WhereF {
  EMBER_HOST_DEVICE T operator()(bool c, T a, T b) const { return c ? a : b; }
};
template <typename T>
struct AddcmulF {
  double value;
  EMBER_HOST_DEVICE T operator()(T s, T a, T b) const { return static_cast<T>(s + static_cast<T>(value) * a * b); }
};
template <typename T>
struct AddcdivF {
  double value;
  EMBER_HOST_DEVICE T operator()(T s, T a, T b) const { return static_cast<T>(s + static_cast<T>(value) * a / b); }
};
template <typename T>
struct LerpF {
  double weight;
  EMBER_HOST_DEVICE T operator()(T s, T e) const { return static_cast<T>(s + static_cast<T>(weight) * (e - s)); }
};
template <typename T>
struct MaskedFillF {
  double value;
  EMBER_HOST_DEVICE T operator()(T s, bool m) const { return m ? static_cast<T>(value) : s; }
};
template <typename T>
constexpr bool is_16bit_float_v = sizeof(T) == 2;
template <typename To, typename From>
struct CastF {
  EMBER_HOST_DEVICE To operator()(From x) const {
    if constexpr (is_16bit_float_v<To> || is_16bit_float_v<From>) {
      return static_cast<To>(static_cast<float>(x));
    } else {
      return static_cast<To>(x);
    }
  }
};

}  // namespace ember::kernels
