// reduce: MPI_Reduce into root's tensor (MPI_IN_PLACE there); other ranks' stay unchanged.
#include "parallel/distributed/detail/reduce_kernels.h"
#include "parallel/distributed/mpi/collectives.h"

namespace ember::parallel::mpi {

void reduce(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, int root, ReduceOp op) {
  for (auto& t : tensors) {
    const MPI_Datatype type = detail::mpi_datatype(t.dtype());
    const MPI_Op mop = detail::mpi_op(op, t.dtype());
    for_each_chunk(t, [&](char* p, int count) {
      if (c.rank == root) {
        EMBER_MPI_CHECK(MPI_Reduce(MPI_IN_PLACE, p, count, type, mop, root, c.comm), info.description);
      } else {
        EMBER_MPI_CHECK(MPI_Reduce(p, nullptr, count, type, mop, root, c.comm), info.description);
      }
    });
    if (op == ReduceOp::AVG && c.rank == root)
      parallel::detail::divide_by(t.dtype(), t.raw_data(), t.numel(), c.size);
  }
}

}  // namespace ember::parallel::mpi
