// all_reduce: ncclAllReduce in place, one per tensor, in one NCCL group. AVG is ncclAvg.
#include "parallel/distributed/nccl/collectives.h"

namespace ember::parallel::nccl {

void all_reduce(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, ReduceOp op) {
  Group group(c, info.description);
  for (auto& t : tensors)
    EMBER_NCCL_CALL(c, ncclAllReduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()),
                                     detail::nccl_datatype(t.dtype()), detail::nccl_op(op), c.comm, c.stream),
                    info.description);
  group.end();
}

}  // namespace ember::parallel::nccl
