#include "examples/common/cli.h"

namespace ember_examples {

void add_job_flags(CLI::App& app, const JobFlags& job, const std::string& backend_default) {
  app.add_flag("--ddp", job.ddp,
               "DistributedDataParallel, one rank per process: run under `ember-run --nproc-per-node N`, "
               "`mpirun -np N` or torchrun; --batch-size is the global batch (each rank takes batch/N); rank 0 "
               "prints and checkpoints")
      ->disable_flag_override();
  app.add_option("--backend", job.backend, "--ddp: the process group's backend (default: " + backend_default + ")")
      ->check(ember::cli::one_of({"tcp", "mpi", "nccl"}))
      ->type_name("NAME");
  app.add_option("--timeout", job.timeout_s, "--ddp: seconds any collective or the rendezvous may take")
      ->check(ember::cli::at_least(1))
      ->type_name("S");
  app.add_option("--seed", job.seed, "seed of initialization, shuffling, dropout and workers")
      ->check(ember::cli::at_least(0))
      ->type_name("N");
  app.add_option("--threads", job.threads, "intra-op threads (default: the cores this process may use / local ranks)")
      ->check(ember::cli::at_least(1))
      ->type_name("N");
  app.add_flag("--resume", job.resume, "continue from the last checkpoint in --checkpoint-dir")
      ->disable_flag_override();
}

}  // namespace ember_examples
