// LaunchOptions: ember-run's command line (CLI11; the usage is generated from the flags).
// Parsing stops at the first argument that is not an option (the program) or after "--";
// everything from there on belongs to the program. Flags accept "--flag value" and
// "--flag=value", with dashes or torchrun's underscores (--nproc_per_node).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace ember::launcher {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: pick a free one (single node only)
  /// This node's address for the other ranks (torchrun's --local-addr); workers get it as
  /// EMBER_TCP_HOST. Empty: each worker finds its address on the route to master_addr.
  std::string local_addr;
  int max_restarts = 0;
  std::string log_dir;  // empty: no log files
  int64_t monitor_interval_ms = 100;
  int64_t stop_timeout_ms = 5000;  // SIGTERM to SIGKILL grace when stopping workers
  /// --cpu-bind auto: each local rank runs on its own block of the CPUs ember-run may use
  /// (cpu_block in core/cpu_affinity.h), when there are at least as many CPUs as local ranks;
  /// none: workers inherit ember-run's affinity.
  bool cpu_bind = true;
  /// --ft: fault-tolerant mode (parallel/ft/manager.h). A rank that dies is marked dead in the
  /// store and replaced (up to max_restarts times per rank) while the others go on; a rank the
  /// others report silent past ft_timeout_ms is killed and replaced.
  bool ft = false;
  int64_t ft_timeout_ms = 10'000;
  int ft_min_ranks = 1;
  int64_t ft_quorum_timeout_ms = 60'000;
  bool help = false;
  std::string program;
  std::vector<std::string> program_args;

  int world_size() const { return nproc_per_node * nnodes; }
};

/// A command-line mistake; main() prints it with the usage and exits with code 2.
class UsageError : public ember::ValueError {
 public:
  explicit UsageError(const std::string& message) : ember::ValueError(message) {}
};

/// Parses argv[1..argc) (argv[0] is ember-run itself). Throws UsageError.
LaunchOptions parse_launch_options(int argc, const char* const* argv);

/// The usage text printed by --help and after a UsageError, generated from the flags.
std::string usage_text();

}  // namespace ember::launcher
