// The NCCL implementation of parallel/detail/comm_nccl.h (CUDA builds with NCCL only).
#include <cuda_runtime.h>
#include <nccl.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/cuda/cuda_device.h"
#include "core/cuda/cuda_stream.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "parallel/detail/comm_nccl.h"
#include "parallel/distributed/nccl/detail/nccl_types.h"

namespace ember::parallel::comm::detail {
namespace {

// Note [NCCL in comm]
// DataParallel's broadcast of the parameters and reduction of the gradients move flat buckets
// (parallel/comm.cpp) between the GPUs of one process. As torch.cuda.comm does, one NCCL
// communicator per ordered device list (rank i is devices[i]) made once by ncclCommInitAll and
// cached for the process; a copy is one ncclGroupStart/End holding one ncclBroadcast or
// ncclReduce per device, each on that device's current stream, so it is ordered after whatever
// made the buckets on those streams and before whatever reads the results there, without a
// host wait. The output buckets come from the caching allocator on those same streams. A
// communicator is used by one copy at a time (its list's mutex): NCCL requires the calls of one
// group on a communicator to come in the same order from every participant, which one host
// thread issuing them all satisfies. The cache is never destroyed: communicators live until the
// process exits (ncclCommDestroy from a static destructor may run after the CUDA runtime is torn
// down).
struct CommList {
  std::vector<ncclComm_t> comms;
  std::mutex mu;
};

std::vector<int> device_indices(const std::vector<Device>& devices) {
  std::vector<int> idx;
  idx.reserve(devices.size());
  for (const Device& d : devices) idx.push_back(d.index);
  return idx;
}

// The cached communicators of `idx`, made by ncclCommInitAll on first use. Returns nullptr, with
// NCCL's reason in `why`, when that fails (nothing is cached then: nccl_ready remembers the
// failure, Note [NCCL fallback] in parallel/detail/comm_nccl.cpp).
CommList* find_or_make_comms(const std::vector<int>& idx, std::string& why) {
  static std::mutex mu;
  static auto* cache = new std::map<std::vector<int>, std::unique_ptr<CommList>>();  // see the Note
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*cache)[idx];
  if (!slot) {
    auto list = std::make_unique<CommList>();
    list->comms.resize(idx.size());
    const ncclResult_t rc = ncclCommInitAll(list->comms.data(), static_cast<int>(idx.size()), idx.data());
    if (rc != ncclSuccess) {
      const char* last = ncclGetLastError(nullptr);
      why = std::string("ncclCommInitAll failed: ") + ncclGetErrorString(rc) +
            (last != nullptr && *last != '\0' ? std::string(": ") + last : std::string());
      cache->erase(idx);
      return nullptr;
    }
    slot = std::move(list);
  }
  return slot.get();
}

CommList& comms_for(const std::vector<int>& idx, const char* who) {
  std::string why;
  CommList* list = find_or_make_comms(idx, why);
  EMBER_CHECK_T(DistributedError, list != nullptr, who, ": ", why);
  return *list;
}

// ncclGroupStart on construction, ncclGroupEnd on leaving scope (also when a call in the group
// threw: the group must be closed before the communicator is used again).
class NcclGroup {
 public:
  explicit NcclGroup(const char* who) : who_(who) { EMBER_NCCL_CHECK(ncclGroupStart(), who_); }
  void end() {
    ended_ = true;
    EMBER_NCCL_CHECK(ncclGroupEnd(), who_);
  }
  ~NcclGroup() {
    if (!ended_) static_cast<void>(ncclGroupEnd());
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

 private:
  const char* who_;
  bool ended_ = false;
};

}  // namespace

std::string nccl_init_comm(const std::vector<Device>& devices) {
  std::string why;
  find_or_make_comms(device_indices(devices), why);
  return why;
}

std::vector<Tensor> nccl_broadcast(const Tensor& flat, const std::vector<Device>& devices, size_t root) {
  const char* who = "broadcast_coalesced (nccl)";
  const std::vector<int> idx = device_indices(devices);
  CommList& list = comms_for(idx, who);
  std::vector<Tensor> out(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    out[i] = i == root ? flat : empty({flat.numel()}, TensorOptions(flat.dtype()).device(devices[i]));
  }
  const ncclDataType_t type = nccl::detail::nccl_datatype(flat.dtype());
  const size_t count = static_cast<size_t>(flat.numel());
  std::lock_guard<std::mutex> lock(list.mu);
  NcclGroup group(who);
  for (size_t i = 0; i < devices.size(); ++i) {
    cuda::CudaDeviceGuard guard(idx[i]);
    EMBER_NCCL_CHECK(ncclBroadcast(out[i].raw_data(), out[i].raw_data(), count, type, static_cast<int>(root),
                                   list.comms[i], cuda::current_stream(idx[i])),
                     who);
  }
  group.end();
  return out;
}

Tensor nccl_reduce_add(const std::vector<Tensor>& flats, const std::vector<Device>& devices, size_t root) {
  const char* who = "reduce_add_coalesced (nccl)";
  const std::vector<int> idx = device_indices(devices);
  CommList& list = comms_for(idx, who);
  const Tensor& ref = flats[root];
  Tensor out = empty({ref.numel()}, TensorOptions(ref.dtype()).device(devices[root]));
  const ncclDataType_t type = nccl::detail::nccl_datatype(ref.dtype());
  const size_t count = static_cast<size_t>(ref.numel());
  std::lock_guard<std::mutex> lock(list.mu);
  NcclGroup group(who);
  for (size_t i = 0; i < devices.size(); ++i) {
    cuda::CudaDeviceGuard guard(idx[i]);
    EMBER_NCCL_CHECK(ncclReduce(flats[i].raw_data(), i == root ? out.raw_data() : nullptr, count, type, ncclSum,
                                static_cast<int>(root), list.comms[i], cuda::current_stream(idx[i])),
                     who);
  }
  group.end();
  return out;
}

}  // namespace ember::parallel::comm::detail
