#include "parallel/distributed/nccl/detail/nccl_types.h"

#include <thread>

#include "core/error.h"
#include "parallel/distributed/detail/call_settle.h"

namespace ember::parallel::nccl::detail {

ncclDataType_t nccl_datatype(DType dtype) {
  switch (dtype) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int64: return ncclInt64;
    case DType::Int32: return ncclInt32;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float16: return ncclFloat16;
    default: break;
  }
  EMBER_THROW(TypeError, "nccl: unsupported dtype ", dtype);
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return ncclSum;
    case ReduceOp::AVG: return ncclAvg;
    case ReduceOp::MAX: return ncclMax;
    case ReduceOp::MIN: return ncclMin;
    case ReduceOp::PRODUCT: return ncclProd;
  }
  return ncclSum;
}

void throw_nccl_error(ncclResult_t r, const char* expr, const std::string& who, const char* file, int line) {
  ::ember::detail::throw_error<DistributedError>(file, line, who, ": ", expr, " failed: ", ncclGetErrorString(r),
                                                 " (ncclResult ", static_cast<int>(r), ")");
}

void throw_cuda_error(cudaError_t e, const char* expr, const std::string& who, const char* file, int line) {
  ::ember::detail::throw_error<DistributedError>(file, line, who, ": ", expr, " failed: ", cudaGetErrorString(e));
}

ncclResult_t settle(ncclComm_t comm, ncclResult_t r, std::chrono::steady_clock::time_point deadline) {
  using parallel::detail::CallState;
  auto state_of = [](ncclResult_t x) {
    return x == ncclSuccess ? CallState::kDone : x == ncclInProgress ? CallState::kInProgress : CallState::kFailed;
  };
  ncclResult_t last = r;
  parallel::detail::settle_until(state_of(r), deadline, [&] {
    if (ncclCommGetAsyncError(comm, &last) != ncclSuccess) last = ncclSystemError;
    return state_of(last);
  });
  return last;  // ncclInProgress: the deadline passed
}

void check_settled(ncclResult_t r, const char* expr, const std::string& who, const char* file, int line) {
  if (r == ncclSuccess) return;
  if (r == ncclInProgress) {
    ::ember::detail::throw_error<DistributedError>(file, line, who, ": ", expr,
                                                   " did not finish before the operation's deadline");
  }
  throw_nccl_error(r, expr, who, file, line);
}

}  // namespace ember::parallel::nccl::detail
