// NCCL helpers of the nccl backend: ember dtypes and ReduceOps as NCCL's, EMBER_NCCL_CHECK and
// EMBER_CUDA_RT_CHECK, and the wait for a non-blocking communicator's call in progress.
// Includes nccl.h and cuda_runtime.h: for files under nccl/ only (the only folder of parallel/
// that includes them; see "Libraries" in parallel/README.md).
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "parallel/distributed/reduce_op.h"

namespace ember::parallel::nccl::detail {

ncclDataType_t nccl_datatype(DType dtype);
ncclRedOp_t nccl_op(ReduceOp op);

[[noreturn]] void throw_nccl_error(ncclResult_t r, const char* expr, const std::string& who, const char* file, int line);
[[noreturn]] void throw_cuda_error(cudaError_t e, const char* expr, const std::string& who, const char* file, int line);

/// A non-blocking communicator's call may return ncclInProgress: polls ncclCommGetAsyncError
/// until it settles or the deadline passes. Returns the final result (ncclInProgress when
/// the deadline passed).
ncclResult_t settle(ncclComm_t comm, ncclResult_t r, std::chrono::steady_clock::time_point deadline);
/// Throws DistributedError unless a settled call succeeded: ncclInProgress here means its
/// deadline passed, a timeout, never a success.
void check_settled(ncclResult_t r, const char* expr, const std::string& who, const char* file, int line);

}  // namespace ember::parallel::nccl::detail

/// Throws DistributedError naming `who`, the call and NCCL's message unless it succeeds.
#define EMBER_NCCL_CHECK(expr, who)                                                                   \
  do {                                                                                                \
    const ncclResult_t ember_nccl_rc_ = (expr);                                                       \
    if (ember_nccl_rc_ != ncclSuccess && ember_nccl_rc_ != ncclInProgress) [[unlikely]]               \
      ::ember::parallel::nccl::detail::throw_nccl_error(ember_nccl_rc_, #expr, (who), EMBER_SOURCE_FILE, __LINE__); \
  } while (0)

/// The same for CUDA runtime calls of the nccl backend.
#define EMBER_CUDA_RT_CHECK(expr, who)                                                                \
  do {                                                                                                \
    const cudaError_t ember_cuda_rc_ = (expr);                                                        \
    if (ember_cuda_rc_ != cudaSuccess) [[unlikely]]                                                   \
      ::ember::parallel::nccl::detail::throw_cuda_error(ember_cuda_rc_, #expr, (who), EMBER_SOURCE_FILE, __LINE__); \
  } while (0)
