// Check macros for CUDA runtime and cuBLAS calls (core/cuda only). A failing call throws
// ember::Error (OutOfMemoryError for allocation failures) whose message names the expression,
// the library's error string and code, the current device and file:line. Thread-safe.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/error.h"

namespace ember::cuda::detail {
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file, int line);

// Note [CUDA error reporting]
// A kernel fails asynchronously: its error surfaces at a later CUDA call, often a synchronizing
// one (a copy to the host, cudaStreamSynchronize). after_launch() checks the launch itself
// (bad configuration: the kernel is named) and remembers the kernel as the calling thread's
// last launch; an error reported by a later call names that kernel as the last one launched
// before it. With EMBER_CUDA_LAUNCH_BLOCKING=1 every launch is followed by a synchronize of its
// stream, so an error is thrown at the launch of the kernel that failed, naming it.

/// Checks the launch just queued on `stream` (see Note [CUDA error reporting]).
void after_launch(const char* kernel_name, cudaStream_t stream);
/// EMBER_CUDA_LAUNCH_BLOCKING=1 in the environment (read once).
bool launch_blocking();
/// The last kernel launched by the calling thread, or nullptr.
const char* last_launched_kernel();
}  // namespace ember::cuda::detail

/// The body of the library checks: throws through ::ember::cuda::detail::thrower(status, text,
/// file, line) unless `expr` returns `ok` (text: the expression as written at the check).
#define EMBER_CUDA_STATUS_CHECK_(Status, ok, thrower, text, expr)                         \
  do {                                                                                    \
    const Status ember_status_ = (expr);                                                  \
    if (ember_status_ != (ok)) [[unlikely]]                                               \
      ::ember::cuda::detail::thrower(ember_status_, text, EMBER_SOURCE_FILE, __LINE__);    \
  } while (0)

/// Throws unless the CUDA runtime call `expr` returns cudaSuccess (clears the error state first).
#define EMBER_CUDA_CHECK(expr) EMBER_CUDA_STATUS_CHECK_(cudaError_t, cudaSuccess, throw_cuda_error, #expr, expr)

/// Throws unless the cuBLAS call `expr` returns CUBLAS_STATUS_SUCCESS.
#define EMBER_CUBLAS_CHECK(expr) \
  EMBER_CUDA_STATUS_CHECK_(cublasStatus_t, CUBLAS_STATUS_SUCCESS, throw_cublas_error, #expr, expr)
