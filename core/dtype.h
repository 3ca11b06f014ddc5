// DType: element types of tensors, with size, name and classification helpers. Value type.
#pragma once
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/half.h"

namespace ember {

enum class DType : int8_t { Float32 = 0, Float64, Int64, Int32, Bool, BFloat16, Float16 };
constexpr DType kFloat32 = DType::Float32;
constexpr DType kFloat64 = DType::Float64;
constexpr DType kInt64 = DType::Int64;
constexpr DType kInt32 = DType::Int32;
constexpr DType kBool = DType::Bool;
constexpr DType kBFloat16 = DType::BFloat16;
constexpr DType kFloat16 = DType::Float16;

constexpr size_t element_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Int32: return 4;
    case DType::Bool: return 1;
    case DType::BFloat16: return 2;
    case DType::Float16: return 2;
  }
  return 0;
}
constexpr bool is_floating_point(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::BFloat16 || t == DType::Float16;
}
constexpr bool is_integral(DType t, bool include_bool = false) {
  return t == DType::Int64 || t == DType::Int32 || (include_bool && t == DType::Bool);
}
/// PyTorch's name: "float32", "int64", ...
const char* dtype_name(DType t);
/// safetensors' name: "F32", "I64", "BOOL", "BF16", ...
const char* dtype_safetensors_name(DType t);
/// Type promotion as PyTorch does for two tensor operands.
DType promote_types(DType a, DType b);

std::ostream& operator<<(std::ostream& os, DType t);

template <typename T> struct CppTypeToDType;
template <> struct CppTypeToDType<float> { static constexpr DType value = DType::Float32; };
template <> struct CppTypeToDType<double> { static constexpr DType value = DType::Float64; };
template <> struct CppTypeToDType<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct CppTypeToDType<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct CppTypeToDType<bool> { static constexpr DType value = DType::Bool; };
template <> struct CppTypeToDType<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct CppTypeToDType<Half> { static constexpr DType value = DType::Float16; };
template <typename T> constexpr DType dtype_of = CppTypeToDType<T>::value;

/// Converts a double to any element type (16-bit floats go through float).
template <typename T>
inline T from_double(double v) {
  if constexpr (sizeof(T) == 2) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

}  // namespace ember

// Dispatch on a runtime DType to a typed lambda body: inside, `scalar_t` is the C++ type.
#define EMBER_DTYPE_CASE(enum_v, type, ...) \
  case enum_v: {                           \
    using scalar_t = type;                 \
    return __VA_ARGS__();                  \
  }

// The case lists the dispatches are made of, one EMBER_DTYPE_CASE per type.
#define EMBER_FLOATING_CASES(...)                                  \
  EMBER_DTYPE_CASE(::ember::DType::Float32, float, __VA_ARGS__)    \
  EMBER_DTYPE_CASE(::ember::DType::Float64, double, __VA_ARGS__)
#define EMBER_NUMERIC_CASES(...)                                   \
  EMBER_FLOATING_CASES(__VA_ARGS__)                                \
  EMBER_DTYPE_CASE(::ember::DType::Int64, int64_t, __VA_ARGS__)    \
  EMBER_DTYPE_CASE(::ember::DType::Int32, int32_t, __VA_ARGS__)
#define EMBER_HALF_CASES(...)                                                  \
  EMBER_DTYPE_CASE(::ember::DType::BFloat16, ::ember::BFloat16, __VA_ARGS__)   \
  EMBER_DTYPE_CASE(::ember::DType::Float16, ::ember::Half, __VA_ARGS__)

/// Every dtype (the switch names each, so -Wswitch flags a dtype added without a case).
#define EMBER_DISPATCH_ALL(dtype, opname, ...)                                \
  [&] {                                                                       \
    switch (dtype) {                                                          \
      EMBER_NUMERIC_CASES(__VA_ARGS__)                                        \
      EMBER_DTYPE_CASE(::ember::DType::Bool, bool, __VA_ARGS__)               \
      EMBER_HALF_CASES(__VA_ARGS__)                                           \
    }                                                                         \
    EMBER_THROW(::ember::TypeError, opname, ": unsupported dtype ", dtype);   \
  }()

/// The dtypes of the case list CASES; any other is a TypeError "<opname><expected><dtype>".
#define EMBER_DISPATCH_CASES(dtype, CASES, opname, expected, ...) \
  [&] {                                                           \
    switch (dtype) {                                              \
      CASES(__VA_ARGS__)                                          \
      default: break;                                             \
    }                                                             \
    EMBER_THROW(::ember::TypeError, opname, expected, dtype);     \
  }()

#define EMBER_DISPATCH_NUMERIC(dtype, opname, ...) \
  EMBER_DISPATCH_CASES(dtype, EMBER_NUMERIC_CASES, opname, ": expected a numeric dtype, got ", __VA_ARGS__)
#define EMBER_DISPATCH_FLOATING(dtype, opname, ...)                                                       \
  EMBER_DISPATCH_CASES(dtype, EMBER_FLOATING_CASES, opname,                                               \
                       ": expected a floating-point dtype (float32 or float64), got ", __VA_ARGS__)
