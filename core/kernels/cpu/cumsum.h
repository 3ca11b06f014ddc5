// CPU kernel of cumsum_stub (core/ops/cumsum_stubs.h): CumsumLineF (core/kernels/cumsum.h) over
// the lines, split over the thread pool; a line's sum does not depend on the thread count.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace ember::kernels::cpu {

void cumsum(DType dtype, int64_t outer, int64_t n, int64_t inner, bool reverse, const void* in, void* out,
            int device_index);

}  // namespace ember::kernels::cpu
