// barrier: an all_reduce of one element on the device; its Work completes when every rank's
// contribution arrived.
#include "core/ops/factory.h"
#include "parallel/distributed/nccl/collectives.h"

namespace ember::parallel::nccl {

void barrier(const Comm& c, const OpInfo& info, std::vector<Tensor>& keep) {
  Tensor one = zeros({1}, TensorOptions(kFloat32).device(Device::cuda(c.device)));
  keep.push_back(one);
  EMBER_NCCL_CALL(c, ncclAllReduce(one.raw_data(), one.raw_data(), 1, ncclFloat32, ncclSum, c.comm, c.stream),
                  info.description);
}

}  // namespace ember::parallel::nccl
