// Slurm: what srun tells each task about its job step, read from the SLURM_* environment,
// and the two compressed notations Slurm writes there (host lists such as node[01-04,07],
// task counts such as 2(x3),1). Tensor-free (in ember_store), so ember-run can use it too.
// Pure functions of their input (or of the environment); thread-safe.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ember::parallel {

/// Expands a Slurm host list: comma-separated hosts, each with any number of bracket
/// groups of numbers and ranges ("node[01-04,07]", "rack[1-2]-n[1-2]"). Ranges keep the
/// zero padding of their lower bound ("node[08-10]" -> node08 node09 node10). Throws
/// ValueError naming the list, the position and what was expected there.
std::vector<std::string> expand_hostlist(const std::string& hostlist);

/// Expands Slurm's tasks-per-node notation: "2(x3),1" -> {2, 2, 2, 1}. Throws ValueError.
std::vector<int> expand_tasks_per_node(const std::string& spec);

/// The port ember's rank 0 listens on under srun when MASTER_PORT is unset: derived from
/// the job and step ids, in [15000, 35000), so every task of a step computes the same one
/// and steps of one job running at once differ.
int slurm_master_port(int64_t job_id, int64_t step_id);

/// One srun task's view of its step. Fields stay empty when their variable is unset.
struct SlurmStep {
  std::optional<int> rank;              // SLURM_PROCID
  std::optional<int> world_size;        // SLURM_NTASKS (SLURM_NPROCS)
  std::optional<int> local_rank;        // SLURM_LOCALID
  std::optional<int> local_world_size;  // SLURM_NTASKS_PER_NODE, else this node's entry of
                                        // SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE
  std::optional<int> node_rank;         // SLURM_NODEID
  std::vector<std::string> hosts;       // SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST), expanded
  std::optional<int64_t> job_id;        // SLURM_JOB_ID (SLURM_JOBID)
  int64_t step_id = 0;                  // SLURM_STEP_ID (SLURM_STEPID)
  /// True when srun started this process (SLURM_PROCID and SLURM_NTASKS are set).
  bool in_step() const { return rank.has_value() && world_size.has_value(); }
};

/// Reads the variables above. A variable that is set but malformed is a ValueError naming it
/// and its value.
SlurmStep read_slurm_step();

}  // namespace ember::parallel
