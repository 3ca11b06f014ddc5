#include "core/dtype.h"

namespace ember {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Int32: return "int32";
    case DType::Bool: return "bool";
    case DType::BFloat16: return "bfloat16";
    case DType::Float16: return "float16";
  }
  return "unknown";
}

const char* dtype_safetensors_name(DType t) {
  switch (t) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int64: return "I64";
    case DType::Int32: return "I32";
    case DType::Bool: return "BOOL";
    case DType::BFloat16: return "BF16";
    case DType::Float16: return "F16";
  }
  return "unknown";
}

namespace {
// Rank in PyTorch's promotion lattice for the dtypes ember has.
int category(DType t) {
  if (t == DType::Bool) return 0;
  if (is_integral(t)) return 1;
  return 2;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 1) return DType::Int64;  // int32 with int64
  // floating: float64 wins; bf16 with f16 -> float32; f32 with 16-bit -> f32
  if (a == DType::Float64 || b == DType::Float64) return DType::Float64;
  return DType::Float32;
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace ember
