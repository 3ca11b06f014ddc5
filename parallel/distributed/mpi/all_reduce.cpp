// all_reduce: MPI_Allreduce in place; AVG sums, then divides by the world size.
#include "parallel/distributed/detail/reduce_kernels.h"
#include "parallel/distributed/mpi/collectives.h"

namespace ember::parallel::mpi {

void all_reduce(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, ReduceOp op) {
  for (auto& t : tensors) {
    char* data = static_cast<char*>(t.raw_data());
    const MPI_Datatype type = detail::mpi_datatype(t.dtype());
    const MPI_Op mop = detail::mpi_op(op, t.dtype());
    for (int64_t begin = 0; begin < t.numel(); begin += kMaxCount) {
      const int count = static_cast<int>(std::min(kMaxCount, t.numel() - begin));
      EMBER_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + begin * static_cast<int64_t>(t.element_size()), count, type,
                                    mop, c.comm),
                      info.description);
    }
    if (op == ReduceOp::AVG) parallel::detail::divide_by(t.dtype(), t.raw_data(), t.numel(), c.size);
  }
}

}  // namespace ember::parallel::mpi
