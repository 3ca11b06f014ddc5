// CPU kernel of native::gather_rows (gather_rows_stub, core/ops/nn_layers_stubs.h): out row i =
// src row index[i] (memcpy over the thread pool), or the fill row where index[i] == -1.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace ember::kernels::cpu {

void gather_rows(DType dtype, const int64_t* index, int64_t out_rows, int64_t cols, const void* src, const void* fill,
                 void* out, int device_index);

}  // namespace ember::kernels::cpu
