// Check macros for CUDA runtime and cuBLAS calls (core/cuda only). A failing call throws
// ember::Error (OutOfMemoryError for allocation failures) whose message names the expression,
// the library's error string and code, the current device and file:line. Thread-safe.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace ember::cuda::detail {
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file, int line);
}  // namespace ember::cuda::detail

/// Throws unless the CUDA runtime call `expr` returns cudaSuccess (clears the error state first).
#define EMBER_CUDA_CHECK(expr)                                                          \
  do {                                                                                  \
    const cudaError_t ember_cuda_err_ = (expr);                                         \
    if (ember_cuda_err_ != cudaSuccess) [[unlikely]]                                    \
      ::ember::cuda::detail::throw_cuda_error(ember_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

/// Throws unless the cuBLAS call `expr` returns CUBLAS_STATUS_SUCCESS.
#define EMBER_CUBLAS_CHECK(expr)                                                               \
  do {                                                                                         \
    const cublasStatus_t ember_cublas_status_ = (expr);                                        \
    if (ember_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                            \
      ::ember::cuda::detail::throw_cublas_error(ember_cublas_status_, #expr, __FILE__, __LINE__); \
  } while (0)
