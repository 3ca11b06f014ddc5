#include "parallel/distributed/mpi/detail/mpi_types.h"

#include <cstdlib>

#include "core/error.h"
#include "parallel/distributed/detail/reduce_kernels.h"

namespace ember::parallel::mpi::detail {

namespace {

std::mutex g_init_mutex;
int g_level = -1;             // guarded by g_init_mutex
std::mutex g_mpi_mutex;       // serializes MPI calls below MPI_THREAD_MULTIPLE
bool g_need_lock = true;      // written once under g_init_mutex before any group exists

MPI_Datatype g_bf16 = MPI_DATATYPE_NULL;
MPI_Datatype g_f16 = MPI_DATATYPE_NULL;
MPI_Op g_ops[2][4];  // [bf16, f16][sum, product, max, min]

template <DType D, ReduceOp Op>
void user_op(void* in, void* inout, int* len, MPI_Datatype*) {
  parallel::detail::reduce_into(D, Op, inout, inout, in, *len);
}

template <DType D>
void make_ops(MPI_Op* ops) {
  MPI_Op_create(&user_op<D, ReduceOp::SUM>, 1, &ops[0]);
  MPI_Op_create(&user_op<D, ReduceOp::PRODUCT>, 1, &ops[1]);
  MPI_Op_create(&user_op<D, ReduceOp::MAX>, 1, &ops[2]);
  MPI_Op_create(&user_op<D, ReduceOp::MIN>, 1, &ops[3]);
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

int ensure_initialized() {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  if (g_level >= 0) return g_level;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  EMBER_CHECK_T(DistributedError, !finalized, "mpi: MPI was finalized already; a new group cannot be made");
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    EMBER_CHECK_T(DistributedError, rc == MPI_SUCCESS, "mpi: MPI_Init_thread failed: ", error_string(rc));
    std::atexit(finalize_at_exit);
  } else {
    MPI_Query_thread(&provided);
  }
  EMBER_CHECK_T(DistributedError, provided >= MPI_THREAD_SERIALIZED,
                "mpi: the MPI library grants thread level ", provided,
                " but the mpi backend calls MPI from its worker threads and needs MPI_THREAD_SERIALIZED or more");
  g_need_lock = provided < MPI_THREAD_MULTIPLE;
  MPI_Type_contiguous(1, MPI_UINT16_T, &g_bf16);
  MPI_Type_commit(&g_bf16);
  MPI_Type_contiguous(1, MPI_UINT16_T, &g_f16);
  MPI_Type_commit(&g_f16);
  make_ops<DType::BFloat16>(g_ops[0]);
  make_ops<DType::Float16>(g_ops[1]);
  g_level = provided;
  return provided;
}

std::unique_lock<std::mutex> lock_mpi() {
  if (!g_need_lock) return {};
  return std::unique_lock<std::mutex>(g_mpi_mutex);
}

MPI_Datatype mpi_datatype(DType dtype) {
  switch (dtype) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int64: return MPI_INT64_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::BFloat16: return g_bf16;
    case DType::Float16: return g_f16;
    default: break;
  }
  EMBER_THROW(TypeError, "mpi: unsupported dtype ", dtype);
}

MPI_Op mpi_op(ReduceOp op, DType dtype) {
  const bool half = dtype == DType::BFloat16 || dtype == DType::Float16;
  if (half) {
    const int t = dtype == DType::BFloat16 ? 0 : 1;
    switch (op) {
      case ReduceOp::SUM:
      case ReduceOp::AVG: return g_ops[t][0];
      case ReduceOp::PRODUCT: return g_ops[t][1];
      case ReduceOp::MAX: return g_ops[t][2];
      case ReduceOp::MIN: return g_ops[t][3];
    }
  }
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG: return MPI_SUM;
    case ReduceOp::PRODUCT: return MPI_PROD;
    case ReduceOp::MAX: return MPI_MAX;
    case ReduceOp::MIN: return MPI_MIN;
  }
  return MPI_SUM;
}

std::string error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, static_cast<size_t>(len));
}

void throw_mpi_error(int code, const char* expr, const std::string& who, const char* file, int line) {
  ::ember::detail::throw_error<DistributedError>(file, line, who, ": ", expr, " failed: ", error_string(code));
}

}  // namespace ember::parallel::mpi::detail
