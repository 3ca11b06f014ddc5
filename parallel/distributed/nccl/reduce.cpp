// reduce: ncclReduce into root's tensor; NCCL leaves the other ranks' buffers alone.
#include "parallel/distributed/nccl/collectives.h"

namespace ember::parallel::nccl {

void reduce(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, int root, ReduceOp op) {
  Group group(c, info.description);
  for (auto& t : tensors)
    EMBER_NCCL_CALL(c, ncclReduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()),
                                  detail::nccl_datatype(t.dtype()), detail::nccl_op(op), root, c.comm, c.stream),
                    info.description);
  group.end();
}

}  // namespace ember::parallel::nccl
