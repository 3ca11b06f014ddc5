// init_process_group: builds a ProcessGroup of a named backend ("tcp", "mpi", "nccl") from
// explicit options or from the environment a launcher sets — torchrun's names (RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; ember-run sets them
// and EMBER_STORE_TOKEN), OpenMPI's under mpirun (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK,
// _LOCAL_SIZE) or Slurm's under srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, ...; the
// step's first host as MASTER_ADDR and a port from the job id when those are unset).
// It also keeps the process's default group. Thread-safe.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "parallel/distributed/process_group.h"
#include "parallel/distributed/store.h"

namespace ember::parallel {

struct InitOptions {
  /// -1: from the environment (RANK / WORLD_SIZE, else OMPI_COMM_WORLD_RANK / _SIZE; the
  /// mpi backend asks MPI itself).
  int rank = -1;
  int world_size = -1;
  /// The rendezvous store; null: made from init_method.
  std::shared_ptr<Store> store;
  /// Per-operation (and rendezvous) timeout.
  int64_t timeout_ms = ProcessGroup::kDefaultTimeoutMs;
  /// "env://" (default): a TCPStore at MASTER_ADDR:MASTER_PORT, hosted by rank 0 unless a
  /// launcher hosts it (ember-run and torchrun say so with EMBER_USE_AGENT_STORE=1 /
  /// TORCHELASTIC_USE_AGENT_STORE=True; then every rank is a client). "tcp://host:port":
  /// the same at that address. "file:///path": a FileStore on a shared file system.
  std::string init_method;
  /// Keys of this group live under "ember_pg/<group_name>/<restart>/<n>" in the store,
  /// where n counts this rank's init_process_group calls on that store (a counter in the
  /// store itself), so successive groups, and ranks that are threads sharing one store,
  /// never collide.
  std::string group_name = "default";
};

/// Makes a process group and installs it as the default one (replacing any earlier). Under
/// EMBER_DISTRIBUTED_DEBUG=INFO or DETAIL a group made over a store gets it as its debug store
/// (ProcessGroup::set_debug_store), and the desync check waits options.timeout_ms.
/// Throws ValueError naming the variable when the environment is missing or invalid, or
/// naming the backend when it is unknown or not built in (mpi without EMBER_HAVE_MPI,
/// nccl without EMBER_HAVE_NCCL); DistributedError/TimeoutError when rendezvous fails.
std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend, InitOptions options = {});

/// The group the last init_process_group made; throws Error when there is none.
std::shared_ptr<ProcessGroup> default_process_group();
bool is_initialized();
/// Forgets the default group (it is destroyed once no one else holds it).
void destroy_process_group();

/// What a launcher told this process, as init_process_group reads it.
struct DistributedEnv {
  std::optional<int> rank, world_size, local_rank, local_world_size;
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
  std::string store_token;        // EMBER_STORE_TOKEN, empty if unset
  bool launcher_store = false;    // a launcher hosts the store: no rank starts a server
  bool torch_store = false;       // ...and it is torchrun's agent: a PyTorch TCPStore (TorchTCPStore)
  int restart_count = 0;          // EMBER_RESTART_COUNT / TORCHELASTIC_RESTART_COUNT
  bool under_mpirun = false;      // the values came from OMPI_COMM_WORLD_*
  bool under_srun = false;        // ...from SLURM_* (see read_slurm_step)
};

/// Reads the variables above, in this order of precedence: torchrun's names (ember-run and
/// torchrun), OMPI_COMM_WORLD_* (mpirun), SLURM_* (srun). Under srun, MASTER_ADDR defaults to
/// the first host of SLURM_STEP_NODELIST and MASTER_PORT to slurm_master_port(job, step).
/// A variable that is set but not a valid number (or port, or host list) is a ValueError
/// naming it and its value. Unset ones stay empty.
DistributedEnv read_distributed_env();

}  // namespace ember::parallel
