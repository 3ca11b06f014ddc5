// comm: copies between the devices of one process, the building blocks of DataParallel (as
// torch.cuda.comm): broadcast, scatter, gather, reduce_add and their coalesced forms. On CPU
// logical devices (cpu:0, cpu:1, ...) every copy is a memcpy; on CUDA a peer copy through
// native::to / native::copy_, except that the coalesced broadcast and reduce among distinct GPUs
// go through NCCL where the build has it (one cached communicator per device list, each device's
// current stream; Note [NCCL in comm] in parallel/cuda/comm_nccl.cpp; EMBER_COMM_NCCL=0 turns it
// off). Nothing here records autograd history (the differentiable
// Scatter/Gather are in parallel/scatter_gather.h). Thread-safe: inputs are only read.
#pragma once
#include <cstddef>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace ember::parallel::comm {

/// Coalesced copies move tensors in flat buckets of at most this many bytes per dtype.
constexpr size_t kDefaultBufferBytes = 10 * 1024 * 1024;

/// Copies `tensor` to every device; entry i aliases `tensor` where devices[i] is its own device.
std::vector<Tensor> broadcast(const Tensor& tensor, const std::vector<Device>& devices);

/// Broadcasts a list of tensors (all on one device) through flat buckets of at most
/// `buffer_bytes` each (one copy per bucket and device). result[i][j] is tensors[j] on
/// devices[i]: the input itself on its own device, otherwise a view into a bucket.
std::vector<std::vector<Tensor>> broadcast_coalesced(const std::vector<Tensor>& tensors,
                                                     const std::vector<Device>& devices,
                                                     size_t buffer_bytes = kDefaultBufferBytes);

/// Sum of same-shaped, same-dtype tensors on different devices, on `destination`
/// (default: the device of inputs[0]). Summed in input order. Always a new tensor.
Tensor reduce_add(const std::vector<Tensor>& inputs, std::optional<Device> destination = std::nullopt);

/// inputs[i] is a list of tensors on device i (all lists alike in length, shapes and dtypes);
/// returns the element-wise sums on `destination` (default: the device of inputs[0][0]),
/// copied through flat buckets of at most `buffer_bytes`.
std::vector<Tensor> reduce_add_coalesced(const std::vector<std::vector<Tensor>>& inputs,
                                         std::optional<Device> destination = std::nullopt,
                                         size_t buffer_bytes = kDefaultBufferBytes);

/// The split sizes of a dimension of size `size` over `num_devices` as torch.chunk makes them
/// (ceil(size / num_devices) each, the last smaller; fewer chunks when size is small). A
/// 0-size dimension makes one empty chunk.
IntList chunk_sizes_for(int64_t size, int64_t num_devices);

/// Splits `tensor` along `dim` (by `chunk_sizes`, which must sum to its size there, one per
/// device at most; default: chunk_sizes_for) and copies chunk i to devices[i]. Returns one
/// tensor per chunk, possibly fewer than devices. A chunk on the tensor's own device is a view.
std::vector<Tensor> scatter(const Tensor& tensor, const std::vector<Device>& devices,
                            const std::optional<IntList>& chunk_sizes = std::nullopt, int64_t dim = 0);

/// Concatenates `tensors` (one per replica, on any devices) along `dim` on `destination`
/// (default: the device of tensors[0]). All sizes except along `dim` must agree; the error
/// names the replicas whose sizes differ and, since unequal lengths usually come from
/// pad_packed_sequence, names total_length as the fix.
Tensor gather(const std::vector<Tensor>& tensors, int64_t dim = 0, std::optional<Device> destination = std::nullopt);

}  // namespace ember::parallel::comm
