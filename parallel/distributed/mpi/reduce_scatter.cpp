// reduce_scatter: the inputs packed into one buffer, then MPI_Reduce_scatter_block into
// output; AVG divides at the end.
#include <cstring>

#include "core/error.h"
#include "parallel/distributed/detail/reduce_kernels.h"
#include "parallel/distributed/mpi/collectives.h"

namespace ember::parallel::mpi {

void reduce_scatter(const Comm& c, const OpInfo& info, Tensor& output, std::vector<Tensor>& inputs, ReduceOp op) {
  const size_t nbytes = output.nbytes();
  EMBER_CHECK_T(ValueError, output.numel() <= kMaxCount, info.description,
                ": the mpi backend scatters at most ", kMaxCount, " elements per rank, got ", output.numel());
  std::vector<uint8_t> packed(nbytes * static_cast<size_t>(c.size));
  for (int r = 0; r < c.size; ++r)
    if (nbytes > 0) std::memcpy(packed.data() + nbytes * static_cast<size_t>(r), inputs[r].raw_data(), nbytes);
  EMBER_MPI_CHECK(MPI_Reduce_scatter_block(packed.data(), output.raw_data(), static_cast<int>(output.numel()),
                                           detail::mpi_datatype(output.dtype()), detail::mpi_op(op, output.dtype()),
                                           c.comm),
                  info.description);
  if (op == ReduceOp::AVG) parallel::detail::divide_by(output.dtype(), output.raw_data(), output.numel(), c.size);
}

}  // namespace ember::parallel::mpi
