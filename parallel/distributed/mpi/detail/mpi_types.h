// MPI helpers of the mpi backend: one-time initialization, ember dtypes and ReduceOps as MPI
// datatypes and ops (bf16 and float16 through committed user types and user ops that add
// in float32), the lock that serializes MPI calls when MPI grants less than
// MPI_THREAD_MULTIPLE, and EMBER_MPI_CHECK. Includes mpi.h: for files under mpi/ only.
#pragma once
#include <mpi.h>

#include <mutex>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "parallel/distributed/reduce_op.h"

namespace ember::parallel::mpi::detail {

/// MPI_Init_thread (asking for MPI_THREAD_MULTIPLE) unless MPI is already initialized;
/// registers MPI_Finalize to run at exit. Throws DistributedError when MPI was finalized
/// already or grants less than MPI_THREAD_SERIALIZED. Thread-safe; returns the level.
int ensure_initialized();

/// Held around every MPI call of the backend when the thread level is below MULTIPLE.
std::unique_lock<std::mutex> lock_mpi();

MPI_Datatype mpi_datatype(DType dtype);
/// AVG maps to MPI_SUM (the caller divides).
MPI_Op mpi_op(ReduceOp op, DType dtype);

/// "MPI_ERR_TRUNCATE: message truncated" for an MPI error code.
std::string error_string(int code);

[[noreturn]] void throw_mpi_error(int code, const char* expr, const std::string& who, const char* file, int line);

}  // namespace ember::parallel::mpi::detail

/// Throws DistributedError naming `who` (rank and op), the call and MPI's message unless
/// `expr` returns MPI_SUCCESS.
#define EMBER_MPI_CHECK(expr, who)                                                               \
  do {                                                                                           \
    const int ember_mpi_rc_ = (expr);                                                            \
    if (ember_mpi_rc_ != MPI_SUCCESS) [[unlikely]]                                               \
      ::ember::parallel::mpi::detail::throw_mpi_error(ember_mpi_rc_, #expr, (who), EMBER_SOURCE_FILE, __LINE__); \
  } while (0)
