// barrier: MPI_Barrier.
#include "parallel/distributed/mpi/collectives.h"

namespace ember::parallel::mpi {

void barrier(const Comm& c, const OpInfo& info) { EMBER_MPI_CHECK(MPI_Barrier(c.comm), info.description); }

}  // namespace ember::parallel::mpi
