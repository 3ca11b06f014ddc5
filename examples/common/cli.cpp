#include "examples/common/cli.h"

#include "core/error.h"

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

void add_output_flags(CLI::App& app, const OutputFlags& flags) {
  app.add_option("--metrics", flags.metrics_path, "JSON lines, one per epoch, appended")->type_name("PATH");
  app.add_option_function<std::string>(
         "--progress", [&flags = flags.progress](const std::string& v) { flags = progress_mode_from_string(v); },
         "auto: a bar on a terminal, else lines")
      ->check(ember::cli::one_of({"auto", "tty", "lines", "none"}))
      ->default_str("auto")
      ->type_name("MODE");
  add_observe_flags(app, flags.observe);
}

void add_ft_flags(CLI::App& app, const FtFlags& flags) {
  app.add_flag("--ft", flags.ft,
               "--ddp: fault-tolerant training under `ember-run --ft`: a rank that dies or hangs is dropped, the "
               "others redo the step without it, and its replacement takes the state from a live rank "
               "(docs/FAULT_TOLERANCE.md)")
      ->disable_flag_override();
  app.add_flag("--trace-steps", flags.trace_steps,
               "--ddp: each rank prints \"step-trace step=S slot=R ranks=N hash=H t_ms=T\" after every committed "
               "step (H: FNV-1a of its parameters, T: wall-clock ms)")
      ->disable_flag_override();
  app.add_option("--ft-fault", flags.ft_fault,
                 "--ft, for tests: SLOT:INCARNATION:STEP:POINT:SIGNAL[,...] makes that rank raise SIGNAL on itself "
                 "(examples/common/ft_job.h)")
      ->type_name("SPEC");
}

void check_ft_flags(const FtFlags& flags, bool ddp, const std::string& backend, bool resume) {
  EMBER_CHECK_T(ember::ValueError, ddp || !flags.trace_steps, "--trace-steps applies only with --ddp");
  if (!flags.ft) {
    EMBER_CHECK_T(ember::ValueError, flags.ft_fault.empty(), "--ft-fault applies only with --ft");
    return;
  }
  EMBER_CHECK_T(ember::ValueError, ddp, "--ft applies only with --ddp (under ember-run --ft)");
  EMBER_CHECK_T(ember::ValueError, backend.empty() || backend == "tcp",
                "--ft: the group is re-formed over the tcp backend; got --backend ", backend);
  EMBER_CHECK_T(ember::ValueError, !resume,
                "--ft: --resume is not supported with it (a replacement takes its state from a live rank)");
}

}  // namespace ember_examples
