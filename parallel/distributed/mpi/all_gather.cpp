// all_gather: MPI_Allgather into one contiguous buffer, then copied to the outputs (which
// may live anywhere). In one call when the per-rank count fits MPI's int.
#include <cstring>

#include "core/error.h"
#include "parallel/distributed/mpi/collectives.h"

namespace ember::parallel::mpi {

void all_gather(const Comm& c, const OpInfo& info, std::vector<Tensor>& outputs, const Tensor& input) {
  const size_t nbytes = input.nbytes();
  EMBER_CHECK_T(ValueError, input.numel() <= kMaxCount, info.description, ": the mpi backend gathers at most ",
                kMaxCount, " elements per rank, got ", input.numel());
  std::vector<uint8_t> all(nbytes * static_cast<size_t>(c.size));
  EMBER_MPI_CHECK(MPI_Allgather(input.raw_data(), static_cast<int>(input.numel()), detail::mpi_datatype(input.dtype()),
                                all.data(), static_cast<int>(input.numel()), detail::mpi_datatype(input.dtype()),
                                c.comm),
                  info.description);
  for (int r = 0; r < c.size; ++r)
    if (nbytes > 0) std::memcpy(outputs[r].raw_data(), all.data() + nbytes * static_cast<size_t>(r), nbytes);
}

}  // namespace ember::parallel::mpi
