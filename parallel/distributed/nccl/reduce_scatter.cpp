// reduce_scatter: the inputs copied into one device buffer, then ncclReduceScatter into
// output, on the group's stream.
#include "core/ops/factory.h"
#include "parallel/distributed/nccl/collectives.h"

namespace ember::parallel::nccl {

void reduce_scatter(const Comm& c, const OpInfo& info, Tensor& output, std::vector<Tensor>& inputs, ReduceOp op,
                    std::vector<Tensor>& keep) {
  const size_t nbytes = output.nbytes();
  Tensor packed = empty({c.size * output.numel()}, TensorOptions(output.dtype()).device(output.device()));
  keep.push_back(packed);
  for (int r = 0; r < c.size; ++r)
    if (nbytes > 0)
      EMBER_CUDA_RT_CHECK(cudaMemcpyAsync(static_cast<char*>(packed.raw_data()) + nbytes * r, inputs[r].raw_data(),
                                          nbytes, cudaMemcpyDeviceToDevice, c.stream),
                          info.description);
  EMBER_NCCL_CALL(c, ncclReduceScatter(packed.raw_data(), output.raw_data(), static_cast<size_t>(output.numel()),
                                       detail::nccl_datatype(output.dtype()), detail::nccl_op(op), c.comm, c.stream),
                  info.description);
}

}  // namespace ember::parallel::nccl
