#include "parallel/detail/comm_nccl.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/config.h"
#include "core/env.h"
#include "core/error.h"
#include "core/warning.h"

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
  static const bool enabled = env::flag("EMBER_COMM_NCCL", true);
  return should_use_nccl(devices, root, dtype, EMBER_HAVE_NCCL != 0, enabled);
}

// Note [NCCL fallback]
// NCCL can be built in and the device list eligible (use_nccl) and still not work: an NCCL
// older than the GPUs, no peer access between the GPUs of a container, a driver NCCL rejects,
// a tool such as compute-sanitizer that NCCL does not run under. ncclCommInitAll says so up
// front, before any data moves. Then that device list takes the peer-copy path for the rest of
// the process (native::to, a cudaMemcpyPeerAsync on the streams; DataParallel's gradient sum
// the per-parameter one of Note [Replica parameters]), and one line on stderr says why, since a
// silent fallback would only show as a slower step. A failure after the communicator exists (an
// NCCL call inside a copy) is a DistributedError, not a fallback: data may already have moved.
bool NcclSupport::ready(const std::vector<Device>& devices) {
  std::vector<int> key;
  for (const Device& d : devices) key.push_back(d.index);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = known_.find(key);
  if (it != known_.end()) return it->second.empty();
  std::string why;
  try {
    why = init_(devices);
  } catch (const std::exception& e) {
    why = e.what();
  }
  known_.emplace(key, why);
  if (!why.empty()) {
    std::ostringstream list;
    for (size_t i = 0; i < devices.size(); ++i) list << (i ? "," : "") << devices[i];
    EMBER_WARN("parallel::comm: NCCL is unavailable for ", list.str(), " (", why, "); copies among them go peer to peer");
  }
  return why.empty();
}

std::string NcclSupport::failure(const std::vector<Device>& devices) {
  std::vector<int> key;
  for (const Device& d : devices) key.push_back(d.index);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = known_.find(key);
  return it == known_.end() ? std::string() : it->second;
}

#if EMBER_HAVE_NCCL
bool nccl_ready(const std::vector<Device>& devices) {
  static auto* support = new NcclSupport(nccl_init_comm);  // never destroyed: see Note [NCCL in comm]
  return support->ready(devices);
}
#else
bool nccl_ready(const std::vector<Device>&) { return false; }

// Without NCCL use_nccl is always false; these exist so comm.cpp links in every build.
std::vector<Tensor> nccl_broadcast(const Tensor&, const std::vector<Device>&, size_t) {
  EMBER_THROW(NotImplementedError, "broadcast_coalesced: this build of ember has no NCCL");
}
Tensor nccl_reduce_add(const std::vector<Tensor>&, const std::vector<Device>&, size_t) {
  EMBER_THROW(NotImplementedError, "reduce_add_coalesced: this build of ember has no NCCL");
}
#endif

}  // namespace ember::parallel::comm::detail
