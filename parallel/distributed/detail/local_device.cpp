#include "parallel/distributed/detail/local_device.h"

#include "core/error.h"

namespace ember::parallel::detail {

int local_device_index(std::optional<int> local_rank, int device_count) {
  EMBER_CHECK_T(DeviceError, device_count > 0, "nccl: the NCCL backend needs a CUDA device, and ", device_count,
                " are visible (ember built without CUDA, no GPU, or CUDA_VISIBLE_DEVICES hides them)");
  if (!local_rank) return 0;
  EMBER_CHECK_T(ValueError, *local_rank >= 0, "nccl: LOCAL_RANK must be non-negative, got ", *local_rank);
  return *local_rank % device_count;
}

}  // namespace ember::parallel::detail
