// broadcast: MPI_Bcast from root, in place.
#include "parallel/distributed/mpi/collectives.h"

namespace ember::parallel::mpi {

void broadcast(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, int root) {
  for (auto& t : tensors) {
    char* data = static_cast<char*>(t.raw_data());
    const MPI_Datatype type = detail::mpi_datatype(t.dtype());
    for (int64_t begin = 0; begin < t.numel(); begin += kMaxCount) {
      const int count = static_cast<int>(std::min(kMaxCount, t.numel() - begin));
      EMBER_MPI_CHECK(MPI_Bcast(data + begin * static_cast<int64_t>(t.element_size()), count, type, root, c.comm),
                      info.description);
    }
  }
}

}  // namespace ember::parallel::mpi
