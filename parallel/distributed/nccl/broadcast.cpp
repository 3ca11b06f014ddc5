// broadcast: ncclBroadcast in place from root, one per tensor, in one NCCL group.
#include "parallel/distributed/nccl/collectives.h"

namespace ember::parallel::nccl {

void broadcast(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, int root) {
  Group group(c, info.description);
  for (auto& t : tensors)
    EMBER_NCCL_CALL(c, ncclBroadcast(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()),
                                     detail::nccl_datatype(t.dtype()), root, c.comm, c.stream),
                    info.description);
  group.end();
}

}  // namespace ember::parallel::nccl
