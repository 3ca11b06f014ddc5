// send/recv: ncclSend / ncclRecv of each tensor in one NCCL group. NCCL has no tags: a
// pair's sends and recvs match in the order they were called.
#include "parallel/distributed/nccl/collectives.h"

namespace ember::parallel::nccl {

void send(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, int dst) {
  Group group(c, info.description);
  for (auto& t : tensors)
    EMBER_NCCL_CALL(c, ncclSend(t.raw_data(), static_cast<size_t>(t.numel()), detail::nccl_datatype(t.dtype()), dst,
                                c.comm, c.stream),
                    info.description);
  group.end();
}

void recv(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, int src) {
  Group group(c, info.description);
  for (auto& t : tensors)
    EMBER_NCCL_CALL(c, ncclRecv(t.raw_data(), static_cast<size_t>(t.numel()), detail::nccl_datatype(t.dtype()), src,
                                c.comm, c.stream),
                    info.description);
  group.end();
}

}  // namespace ember::parallel::nccl
