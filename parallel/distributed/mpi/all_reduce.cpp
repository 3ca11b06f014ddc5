// all_reduce: MPI_Allreduce in place; AVG sums, then divides by the world size.
#include "parallel/distributed/detail/reduce_kernels.h"
#include "parallel/distributed/mpi/collectives.h"

namespace ember::parallel::mpi {

void all_reduce(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, ReduceOp op) {
  for (auto& t : tensors) {
    const MPI_Datatype type = detail::mpi_datatype(t.dtype());
    const MPI_Op mop = detail::mpi_op(op, t.dtype());
    for_each_chunk(t, [&](char* p, int count) {
      EMBER_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, p, count, type, mop, c.comm), info.description);
    });
    if (op == ReduceOp::AVG) parallel::detail::divide_by(t.dtype(), t.raw_data(), t.numel(), c.size);
  }
}

}  // namespace ember::parallel::mpi
