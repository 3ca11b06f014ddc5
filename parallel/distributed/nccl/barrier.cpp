// barrier: an all_reduce of one element on the device; its Work completes when every rank's
// contribution arrived.
#include "core/ops/factory.h"
#include "parallel/distributed/nccl/collectives.h"

namespace ember::parallel::nccl {

void barrier(const Comm& c, const OpInfo& info, std::vector<Tensor>& keep) {
  // Zeroed on the group's stream, after its start event (regression: a fill on the caller's
  // stream after the start event was not ordered before the all-reduce).
  Tensor one = empty({1}, TensorOptions(kFloat32).device(Device::cuda(c.device)));
  keep.push_back(one);
  EMBER_CUDA_RT_CHECK(cudaMemsetAsync(one.raw_data(), 0, sizeof(float), c.stream), info.description);
  EMBER_NCCL_CALL(c, ncclAllReduce(one.raw_data(), one.raw_data(), 1, ncclFloat32, ncclSum, c.comm, c.stream),
                  info.description);
}

}  // namespace ember::parallel::nccl
