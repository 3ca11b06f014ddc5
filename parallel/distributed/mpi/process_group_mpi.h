// ProcessGroupMPI: the mpi backend, over MPI_COMM_WORLD (duplicated) of OpenMPI or another
// MPI: collectives are MPI's own (MPI_Allreduce, MPI_Bcast, ...), run in call order on one
// worker thread per group; send/recv are MPI_Isend/MPI_Irecv that the worker progresses
// between collectives. CPU tensors (CUDA-aware MPI is not assumed). A watchdog fails an
// operation that outlives the timeout with DistributedError and breaks the group, since MPI
// cannot interrupt a collective; see parallel/README.md. mpi.h stays out of this header.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "parallel/distributed/process_group.h"

namespace ember::parallel {

struct ProcessGroupMPIOptions {
  int64_t timeout_ms = ProcessGroup::kDefaultTimeoutMs;
};

class ProcessGroupMPI final : public ProcessGroup {
 public:
  /// Initializes MPI when needed (MPI_THREAD_MULTIPLE if the library grants it, else
  /// SERIALIZED with a process-wide lock) and makes a group of all of MPI_COMM_WORLD.
  /// Throws DistributedError when MPI cannot be initialized.
  static std::shared_ptr<ProcessGroupMPI> create(ProcessGroupMPIOptions options = {});
  ~ProcessGroupMPI() override;

  std::string backend_name() const override { return "mpi"; }
  bool is_broken() const override;
  std::string broken_reason() const override;

  struct Impl;

 protected:
  EMBER_PROCESS_GROUP_HOOKS_OVERRIDE;

 private:
  ProcessGroupMPI(int rank, int size, std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;  // shared with the worker and watchdog threads
};

namespace mpi {
/// Rank 0's `bytes` (num_bytes of them) on every rank of MPI_COMM_WORLD, initializing MPI
/// when needed: how the nccl backend's unique id travels under mpirun without a store.
std::vector<uint8_t> broadcast_bytes(std::vector<uint8_t> bytes, size_t num_bytes);
/// MPI_COMM_WORLD's rank of this process (initializing MPI when needed).
int world_rank();
}  // namespace mpi

}  // namespace ember::parallel
