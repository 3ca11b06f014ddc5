// ReduceOp: how all_reduce, reduce and reduce_scatter combine the ranks' values. Value type.
// AVG is SUM divided by the world size once, at the end (integer dtypes divide with
// truncation toward zero, as C++ does); PRODUCT multiplies. bf16 values are combined in
// float32 and rounded back to bf16 at every step of the algorithm (as NCCL does).
#pragma once
#include <ostream>

namespace ember::parallel {

enum class ReduceOp { SUM, AVG, MAX, MIN, PRODUCT };

/// "sum", "avg", "max", "min", "product".
inline const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return "sum";
    case ReduceOp::AVG: return "avg";
    case ReduceOp::MAX: return "max";
    case ReduceOp::MIN: return "min";
    case ReduceOp::PRODUCT: return "product";
  }
  return "?";
}

inline std::ostream& operator<<(std::ostream& os, ReduceOp op) { return os << reduce_op_name(op); }

}  // namespace ember::parallel
