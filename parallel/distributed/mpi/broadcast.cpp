// broadcast: MPI_Bcast from root, in place.
#include "parallel/distributed/mpi/collectives.h"

namespace ember::parallel::mpi {

void broadcast(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, int root) {
  for (auto& t : tensors) {
    const MPI_Datatype type = detail::mpi_datatype(t.dtype());
    for_each_chunk(t, [&](char* p, int count) {
      EMBER_MPI_CHECK(MPI_Bcast(p, count, type, root, c.comm), info.description);
    });
  }
}

}  // namespace ember::parallel::mpi
