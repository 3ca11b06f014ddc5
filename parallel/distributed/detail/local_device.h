// The CUDA device a rank of the nccl backend takes when it was not given one. Device-neutral, so
// the CPU tests check the choice. Pure function; thread-safe.
#pragma once
#include <optional>

namespace ember::parallel::detail {

/// The CUDA device of a rank that was not given one: local_rank % device_count, as the example
/// and torchrun's scripts pick it, so a rank whose CUDA_VISIBLE_DEVICES shows it only its own GPU
/// (device_count 1, LOCAL_RANK 3) takes device 0; 0 without a local rank. Throws
/// DeviceError for device_count <= 0 and ValueError for a negative local rank.
int local_device_index(std::optional<int> local_rank, int device_count);

}  // namespace ember::parallel::detail
