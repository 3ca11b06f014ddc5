// ProcessGroupNCCL: the nccl backend, for CUDA tensors on this rank's one device. Its NCCL
// communicator is made with ncclCommInitRank from a unique id that rank 0 draws and passes
// through the Store (or through MPI under mpirun; see init.h). Operations are enqueued on the
// group's own CUDA stream, after the work already queued on the default stream, from the
// calling thread; each Work completes with a CUDA event. A watchdog thread finishes Works,
// and on a NCCL error or a timeout aborts the communicator (ncclCommAbort): the group is
// then broken. NCCL ignores tags: send/recv match in call order. nccl.h stays out of here.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda_info.h"
#include "parallel/distributed/process_group.h"
#include "parallel/distributed/store.h"

namespace ember::parallel {

struct ProcessGroupNCCLOptions {
  int64_t timeout_ms = ProcessGroup::kDefaultTimeoutMs;
  /// The CUDA device of this rank; -1: LOCAL_RANK modulo the device count (0 without it).
  int device = -1;
};

class ProcessGroupNCCL final : public ProcessGroup {
 public:
  static constexpr size_t kUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
  /// ncclGetUniqueId's bytes (rank 0 draws one; the others must get the same).
  static std::vector<uint8_t> make_unique_id();
  /// The NCCL library this process loaded (ncclGetVersion) and the one built against
  /// (NCCL_VERSION_CODE), as major * 10000 + minor * 100 + patch; loaded is 0 when the query fails.
  static LibraryVersion nccl_version();

  /// Rank 0 draws the unique id and sets it in `store`; the others get it from there.
  /// Throws DeviceError when no CUDA device is visible or options.device is not one of them,
  /// DistributedError when NCCL fails or the ranks do not all arrive within options.timeout_ms.
  ProcessGroupNCCL(std::shared_ptr<Store> store, int rank, int size, ProcessGroupNCCLOptions options = {});
  /// With the unique id already shared (e.g. by MPI_Bcast).
  ProcessGroupNCCL(std::vector<uint8_t> unique_id, int rank, int size, ProcessGroupNCCLOptions options = {});
  ~ProcessGroupNCCL() override;

  std::string backend_name() const override { return "nccl"; }
  bool is_broken() const override;
  std::string broken_reason() const override;
  int device() const;

  struct Impl;

 protected:
  EMBER_PROCESS_GROUP_HOOKS_OVERRIDE;

 private:
  void init(std::vector<uint8_t> unique_id, ProcessGroupNCCLOptions options);
  std::shared_ptr<Impl> impl_;  // shared with the watchdog thread
};

}  // namespace ember::parallel
