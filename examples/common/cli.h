// The flags every example's training job takes, added to a command line built with
// ember::cli (core/cli.h): add_job_flags reads --ddp, --backend, --timeout, --seed, --threads
// and --resume into the fields an example names; add_ft_flags reads --ft, --trace-steps and
// --ft-fault (the fault-tolerant loop of examples/common/ft_job.h); add_output_flags --metrics,
// --progress and the observe flags. usage_of and parse_command_line run an example's
// command_line(Options&) builder.
#pragma once
#include <cstdint>
#include <string>

#include "core/cli.h"
#include "examples/common/observe.h"
#include "examples/common/progress.h"

namespace ember_examples {

/// Where add_job_flags writes: the fields of an example's options.
struct JobFlags {
  bool& ddp;             // --ddp
  std::string& backend;  // --backend tcp | mpi | nccl
  int64_t& timeout_s;    // --timeout S, at least 1
  uint64_t& seed;        // --seed N, at least 0
  int& threads;          // --threads N, at least 1
  bool& resume;          // --resume
};

/// Adds the flags of JobFlags to `app`; `backend_default` is the help's text for --backend. An
/// example may change a flag's description afterwards (app.get_option("--threads")).
void add_job_flags(CLI::App& app, const JobFlags& job, const std::string& backend_default);

/// Where add_output_flags writes.
struct OutputFlags {
  std::string& metrics_path;  // --metrics PATH: JSON lines, one per epoch, appended
  ProgressMode& progress;     // --progress auto | tty | lines | none
  ObserveFlags& observe;      // --tensorboard, --profile, --profile-steps (add_observe_flags)
};

void add_output_flags(CLI::App& app, const OutputFlags& flags);

/// The --help text of the command line `command_line(Options&)` builds (a CLI11 app writing into
/// its argument).
template <typename Options, typename CommandLine>
std::string usage_of(CommandLine command_line) {
  Options o;
  return command_line(o)->help();
}

/// Parses argv[1..] with that command line: `help` set on --help, nothing else checked. Throws
/// ValueError as ember::cli::parse does.
template <typename Options, typename CommandLine>
Options parse_command_line(CommandLine command_line, int argc, const char* const* argv) {
  Options o;
  auto app = command_line(o);
  o.help = !ember::cli::parse(*app, argc, argv);
  return o;
}

/// Where add_ft_flags writes.
struct FtFlags {
  bool& ft;               // --ft
  bool& trace_steps;      // --trace-steps
  std::string& ft_fault;  // --ft-fault SPEC
};

void add_ft_flags(CLI::App& app, const FtFlags& flags);

/// The checks every example's --ft makes after parsing: --ft and --trace-steps need --ddp, --ft the
/// tcp backend (the manager re-forms tcp groups) and no --resume (a replacement takes a live
/// rank's state), --ft-fault needs --ft. Throws ValueError naming the flag.
void check_ft_flags(const FtFlags& flags, bool ddp, const std::string& backend, bool resume);

}  // namespace ember_examples
