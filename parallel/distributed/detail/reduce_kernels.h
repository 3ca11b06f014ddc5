// The element-wise combining loops the CPU backends (tcp, and mpi's bf16/f16 user ops) run
// on received data. Plain loops the compiler vectorizes; 16-bit floats go through float32.
// Stateless and thread-safe.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "parallel/distributed/reduce_op.h"

namespace ember::parallel::detail {

/// True for the dtypes the process groups reduce: float32, float64, int64, int32, bf16, f16.
bool is_reducible_dtype(DType dtype);

/// dst[i] = a[i] op b[i] for i < n; dst may alias a or b exactly. AVG combines as SUM.
/// Throws TypeError for other dtypes.
void reduce_into(DType dtype, ReduceOp op, void* dst, const void* a, const void* b, int64_t n);

/// dst[i] /= divisor (AVG's last step; integers truncate toward zero).
void divide_by(DType dtype, void* dst, int64_t n, int64_t divisor);

/// A reduction's last step in one pass: dst[i] = dst[i] op b[i], divided by `divisor` when
/// op is AVG, and also stored to copy[i] when copy is not null (b and copy must not overlap
/// dst or each other).
/// The same values as reduce_into, divide_by and a memcpy one after another.
void reduce_last_into(DType dtype, ReduceOp op, void* dst, const void* b, void* copy, int64_t n, int64_t divisor);

}  // namespace ember::parallel::detail
