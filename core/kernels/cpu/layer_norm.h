// CPU kernels of layer_norm over contiguous [M, N] rows (native::layer_norm_forward /
// _backward): statistics and sums in double; the weight/bias gradients are summed over fixed
// blocks of 64 rows, so they do not depend on the thread count.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace ember::kernels::cpu {

/// y = (x - mean) * rstd * w + b per row (w, b may be null); writes mean and rstd ([M]).
void layer_norm_forward(DType dtype, const void* x, const void* w, const void* b, void* y, double* mean, double* rstd,
                        int64_t M, int64_t N, double eps, int device_index);
/// Any of gx, gw, gb may be null (not needed).
void layer_norm_backward(DType dtype, const void* g, const void* x, const void* w, const double* mean,
                         const double* rstd, int64_t M, int64_t N, void* gx, void* gw, void* gb, int device_index);

}  // namespace ember::kernels::cpu
