// all_reduce_found_inf: the GradScaler hook that makes every rank of a process group agree on
// whether a step overflowed (optim::GradScalerOptions::found_inf_sync). Each rank's flag is
// all-reduced with MAX, so when any rank saw an inf or NaN gradient, every rank skips the step
// and backs off its scale: the replicas of DistributedDataParallel stay identical.
#pragma once
#include <functional>
#include <memory>

#include "core/device.h"
#include "core/tensor.h"
#include "parallel/distributed/process_group.h"
#include "parallel/distributed/work.h"

namespace ember::parallel {

/// A found_inf_sync for `group`. The flag travels on `device` (a CUDA device for nccl; the CPU
/// for tcp and mpi). Waits at most timeout_ms (default: the group's own timeout); a failed or
/// timed-out all_reduce throws its DistributedError / TimeoutError out of unscale_().
std::function<void(Tensor& found_inf)> all_reduce_found_inf(std::shared_ptr<ProcessGroup> group,
                                                            Device device = Device::cpu(),
                                                            int64_t timeout_ms = Work::kNoTimeout);

}  // namespace ember::parallel
