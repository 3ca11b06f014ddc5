// The NCCL path of parallel/comm's coalesced copies (as torch.cuda.comm's): which copies it
// carries, and the device-neutral entry points of its implementation in parallel/cuda/. A build
// without NCCL has the choice function only; the copies then always take the peer-copy path
// (native::to, a cudaMemcpyPeerAsync on the streams between GPUs), and so does a device list
// whose communicator NCCL cannot make (nccl_ready, Note [NCCL fallback] in comm_nccl.cpp). See
// Note [NCCL in comm] in parallel/cuda/comm_nccl.cpp. Thread-safe.
#pragma once
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace ember::parallel::comm::detail {

/// Whether a coalesced copy of `dtype` among `devices` (one entry per participant, the source
/// or destination `root` among them) goes through NCCL: the build has NCCL (`nccl_built`), it
/// is not switched off (EMBER_COMM_NCCL=0 makes `enabled` false), there are at least two
/// devices, all CUDA, pairwise distinct, `root` is one of them and NCCL has the dtype (not
/// Bool). Otherwise (cpu devices, a mixed cuda + cpu list, a repeated device, a root outside the
/// list, Bool) the peer-copy path runs.
bool should_use_nccl(const std::vector<Device>& devices, const Device& root, DType dtype, bool nccl_built,
                     bool enabled);

/// should_use_nccl with this build's NCCL and the environment's EMBER_COMM_NCCL (read once).
bool use_nccl(const std::vector<Device>& devices, const Device& root, DType dtype);

/// Whether NCCL works for a device list, asked once per list (see Note [NCCL fallback] in
/// parallel/detail/comm_nccl.cpp). `init` makes and caches the list's communicator and returns ""
/// or the reason it could not (NCCL's error text). Thread-safe; device-neutral so CPU tests
/// drive it with a fake `init`.
class NcclSupport {
 public:
  using InitFn = std::function<std::string(const std::vector<Device>&)>;
  explicit NcclSupport(InitFn init) : init_(std::move(init)) {}
  /// True when `devices`' communicator exists or was just made; false, for the rest of the
  /// process, when making it failed once (reported once on stderr: the copies go peer to peer).
  bool ready(const std::vector<Device>& devices);
  /// "" or why `devices` take the peer-copy path (the failure ready() reported).
  std::string failure(const std::vector<Device>& devices);

 private:
  InitFn init_;
  std::mutex mu_;
  std::map<std::vector<int>, std::string> known_;  // guarded by mu_: device indices -> "" or the failure
};

/// NcclSupport over this build's NCCL, for the process: true where use_nccl chose NCCL and a
/// communicator over `devices` could be made. Always false in a build without NCCL.
bool nccl_ready(const std::vector<Device>& devices);

/// NCCL-only: makes and caches the communicator over `devices` (CUDA, distinct); "" on success,
/// else NCCL's reason (ncclCommInitAll's error and ncclGetLastError). The `init` of nccl_ready.
std::string nccl_init_comm(const std::vector<Device>& devices);

/// NCCL-only (use_nccl and nccl_ready were true): broadcasts the contiguous 1-D `flat` (on `devices[root]`) to
/// every device; returns one tensor per device, entry `root` being `flat` itself. Each transfer
/// runs on its device's current stream, in one NCCL group over the cached communicator of
/// `devices`. Throws DistributedError when NCCL fails.
std::vector<Tensor> nccl_broadcast(const Tensor& flat, const std::vector<Device>& devices, size_t root);

/// NCCL-only: the sum of `flats` (contiguous 1-D, alike in size and dtype, flats[i] on
/// devices[i]) as a new tensor on devices[root], reduced in one NCCL group on the devices'
/// current streams.
Tensor nccl_reduce_add(const std::vector<Tensor>& flats, const std::vector<Device>& devices, size_t root);

}  // namespace ember::parallel::comm::detail
