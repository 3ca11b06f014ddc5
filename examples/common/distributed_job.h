// DistributedJob: an example's place in a --ddp job (rank, world size, process group) and the
// small collectives its training loop needs (sums of statistics, a barrier), plus say() for
// reports only rank 0 prints, epoch_seed() for per-epoch seeds and local_shard_reducer() for
// --deterministic in one process. join_job() reads the
// environment a launcher sets (ember-run, torchrun, mpirun, srun: see
// parallel/distributed/init.h) and picks the backend. One per process; not thread-safe.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "nn/module.h"
#include "parallel/deterministic_reducer.h"
#include "parallel/distributed/process_group.h"

namespace ember_examples {

struct DistributedJob {
  std::shared_ptr<ember::parallel::ProcessGroup> group;  // null outside a --ddp job
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  int local_world = 1;
  int64_t timeout_ms = 0;
  ember::Device device = ember::Device::cpu(0);  // the rank's device: ddp_device(local_rank, GPUs)
  bool is_main() const { return rank == 0; }
  /// Sums `values` over the ranks (returns them unchanged outside a job); over nccl on the rank's
  /// device (nccl reduces only CUDA tensors), over tcp and mpi on the host.
  std::vector<double> sum(std::vector<double> values) const;
  /// Waits for every rank (nothing outside a job).
  void barrier() const;
};

struct JobOptions {
  bool ddp = false;     // false: a one-process "job" (rank 0 of 1, no group)
  std::string backend;  // tcp | mpi | nccl; empty: default_ddp_backend
  int64_t timeout_s = 300;
};

/// The backend of a --ddp job: `explicit_backend` (--backend) when set; else nccl wherever CUDA
/// devices are visible (under mpirun too), and without GPUs mpi under mpirun, tcp otherwise.
std::string default_ddp_backend(const std::string& explicit_backend, bool under_mpirun, int cuda_devices);

/// The device of the rank with this local rank: cuda:(local_rank % cuda_devices) with GPUs (so
/// per-rank CUDA_VISIBLE_DEVICES, which leaves each rank one device, also works), else cpu:0.
/// Throws ValueError for a negative local rank.
ember::Device ddp_device(int local_rank, int cuda_devices);

/// Joins the job the launcher started (or returns rank 0 of 1 without --ddp). Every rank prints
/// "<program>: rank R of W (local rank L, pid P), <backend> backend" to `out` once. Throws
/// ValueError naming the launchers when --ddp is given outside one, DistributedError when the
/// rendezvous fails.
DistributedJob join_job(const std::string& program, const JobOptions& options, std::FILE* out);

/// printf to `out`, or nothing when it is null (the ranks other than 0).
[[gnu::format(printf, 2, 3)]] void say(std::FILE* out, const char* format, ...);

/// splitmix64 of (seed, value): neighbouring values give unrelated seeds.
uint64_t mix_seed(uint64_t seed, uint64_t value);

/// A well-mixed seed for epoch `epoch` of a run seeded with `seed` (mix_seed of the pair):
/// epoch e's randomness depends on (seed, e) only, so a resumed run draws what an
/// uninterrupted one does.
uint64_t epoch_seed(uint64_t seed, int epoch);

/// --deterministic without --ddp: a group-less DeterministicReducer over `model`'s parameters,
/// the same exact sum of `shards` shards' gradients in one process.
std::unique_ptr<ember::parallel::DeterministicReducer> local_shard_reducer(ember::nn::Module& model, int64_t shards);

}  // namespace ember_examples
