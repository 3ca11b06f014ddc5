#include "parallel/detail/comm_nccl.h"

#include <cstdlib>
#include <cstring>

#include "core/config.h"
#include "core/error.h"

namespace ember::parallel::comm::detail {

bool should_use_nccl(const std::vector<Device>& devices, const Device& root, DType dtype, bool nccl_built,
                     bool enabled) {
  if (!nccl_built || !enabled || devices.size() < 2 || dtype == DType::Bool) return false;
  bool root_listed = false;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!devices[i].is_cuda()) return false;
    for (size_t k = 0; k < i; ++k) {
      if (devices[k] == devices[i]) return false;
    }
    root_listed = root_listed || devices[i] == root;
  }
  return root_listed;
}

bool use_nccl(const std::vector<Device>& devices, const Device& root, DType dtype) {
  static const bool enabled = [] {
    const char* v = std::getenv("EMBER_COMM_NCCL");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return should_use_nccl(devices, root, dtype, EMBER_HAVE_NCCL != 0, enabled);
}

#if !EMBER_HAVE_NCCL
// Without NCCL use_nccl is always false; these exist so comm.cpp links in every build.
std::vector<Tensor> nccl_broadcast(const Tensor&, const std::vector<Device>&, size_t) {
  EMBER_THROW(NotImplementedError, "broadcast_coalesced: this build of ember has no NCCL");
}
Tensor nccl_reduce_add(const std::vector<Tensor>&, const std::vector<Device>&, size_t) {
  EMBER_THROW(NotImplementedError, "reduce_add_coalesced: this build of ember has no NCCL");
}
#endif

}  // namespace ember::parallel::comm::detail
