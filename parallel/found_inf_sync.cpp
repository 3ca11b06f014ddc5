#include "parallel/found_inf_sync.h"

#include "core/ops/native.h"

namespace ember::parallel {

std::function<void(Tensor& found_inf)> all_reduce_found_inf(std::shared_ptr<ProcessGroup> group, Device device,
                                                            int64_t timeout_ms) {
  EMBER_CHECK_T(ValueError, group != nullptr, "all_reduce_found_inf: the process group is null");
  return [group = std::move(group), device, timeout_ms](Tensor& found_inf) {
    Tensor flag = native::to(found_inf, device);
    group->all_reduce(flag, ReduceOp::MAX)->wait(timeout_ms);
    if (!flag.is_same(found_inf)) native::copy_(found_inf, flag);
  };
}

}  // namespace ember::parallel
