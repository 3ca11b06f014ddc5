// EMBER_CUDNN_CHECK and the calling thread's cuDNN handle of a device (core/cuda only; built
// when cuDNN is found). A failing call throws ember::Error (OutOfMemoryError for
// CUDNN_STATUS_ALLOC_FAILED) naming the expression, cuDNN's status string and code, the
// device and file:line. Handles: one per device and host thread, taken from a per-device pool
// (created on first use, returned to the pool when the thread ends, never destroyed: see
// cublas_gemm.h on teardown), bound to the thread's current stream at every use.
// Thread-safe.
#pragma once
#include <cudnn.h>

#include "core/cuda/cuda_check.h"
#include "core/error.h"

namespace ember::cuda {

namespace detail {
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* expr, const char* file, int line);
}  // namespace detail

/// The calling thread's cuDNN handle for cuda:device_index (which the caller has made
/// current), bound to the thread's current stream on that device (Note [Current stream]).
cudnnHandle_t cudnn_handle(int device_index);

}  // namespace ember::cuda

/// Throws unless the cuDNN call `expr` returns CUDNN_STATUS_SUCCESS.
#define EMBER_CUDNN_CHECK(expr) \
  EMBER_CUDA_STATUS_CHECK_(cudnnStatus_t, CUDNN_STATUS_SUCCESS, throw_cudnn_error, #expr, expr)
