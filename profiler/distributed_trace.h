// One Chrome trace for a whole job: every rank's profiler events (core/profiler.h) gathered onto
// rank 0, one process track per rank, and each rank's share of communication that overlapped
// computation. A collective over a ProcessGroup: every rank calls it.
#pragma once
#include <string>
#include <vector>

#include "core/profiler.h"
#include "parallel/distributed/process_group.h"

namespace ember::profiler {

/// What export_distributed_chrome_trace found, per rank (index = rank).
struct DistributedTraceSummary {
  std::vector<double> comm_overlap;  ///< comm_overlap() of each rank's events; -1: it communicated nothing
  std::vector<int64_t> num_events;   ///< events each rank recorded
};

/// Gathers profiler::events() of every rank of `group` (its host tensors: the tcp and mpi
/// backends) and writes one Chrome trace-event JSON file at `path` on rank 0 (process id =
/// rank). Returns the summary on rank 0; other ranks get an empty one. Throws what the group's
/// collectives throw, and ember::Error naming the path when rank 0 cannot write it.
DistributedTraceSummary export_distributed_chrome_trace(parallel::ProcessGroup& group, const std::string& path);

/// The one-line report of a summary: "communication overlapped with computation: rank 0 87.1%,
/// rank 1 85.0%" ("none" for a rank that did not communicate).
std::string overlap_report(const DistributedTraceSummary& summary);

}  // namespace ember::profiler
