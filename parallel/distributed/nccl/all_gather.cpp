// all_gather: ncclAllGather into one device buffer, then device copies into the outputs
// (which may live anywhere on the device), all on the group's stream.
#include "core/ops/factory.h"
#include "parallel/distributed/nccl/collectives.h"

namespace ember::parallel::nccl {

void all_gather(const Comm& c, const OpInfo& info, std::vector<Tensor>& outputs, const Tensor& input,
                std::vector<Tensor>& keep) {
  const size_t nbytes = input.nbytes();
  Tensor all = empty({c.size * input.numel()}, TensorOptions(input.dtype()).device(input.device()));
  keep.push_back(all);
  EMBER_NCCL_CALL(c, ncclAllGather(input.raw_data(), all.raw_data(), static_cast<size_t>(input.numel()),
                                   detail::nccl_datatype(input.dtype()), c.comm, c.stream),
                  info.description);
  for (int r = 0; r < c.size; ++r)
    if (nbytes > 0)
      EMBER_CUDA_RT_CHECK(cudaMemcpyAsync(outputs[r].raw_data(), static_cast<char*>(all.raw_data()) + nbytes * r,
                                          nbytes, cudaMemcpyDeviceToDevice, c.stream),
                          info.description);
}

}  // namespace ember::parallel::nccl
