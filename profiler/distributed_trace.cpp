#include "profiler/distributed_trace.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/ops/factory.h"

namespace ember::profiler {

DistributedTraceSummary export_distributed_chrome_trace(parallel::ProcessGroup& group, const std::string& path) {
  const int world = group.size(), rank = group.rank();
  const std::vector<Event> mine = events();
  const std::string fragment = trace_events_json(mine, rank);
  // Per rank: fragment length, event count, overlap (as float64 bits). Then the fragments,
  // padded to the longest and carried as int64 words (the groups reduce no byte dtype).
  Tensor meta = from_vector(std::vector<double>{static_cast<double>(fragment.size()), static_cast<double>(mine.size()),
                                                comm_overlap(mine)},
                            {3});
  std::vector<Tensor> metas;
  for (int r = 0; r < world; ++r) metas.push_back(zeros({3}, kFloat64));
  group.all_gather(metas, meta)->wait();
  size_t longest = 0;
  for (const Tensor& m : metas) longest = std::max(longest, static_cast<size_t>(m.data_ptr<double>()[0]));
  const int64_t words = static_cast<int64_t>((longest + 7) / 8);
  Tensor packed = zeros({std::max<int64_t>(words, 1)}, kInt64);
  std::memcpy(packed.data_ptr<int64_t>(), fragment.data(), fragment.size());
  std::vector<Tensor> all;
  for (int r = 0; r < world; ++r) all.push_back(zeros({std::max<int64_t>(words, 1)}, kInt64));
  group.all_gather(all, packed)->wait();
  if (rank != 0) return {};
  DistributedTraceSummary summary;
  std::vector<std::string> fragments;
  for (int r = 0; r < world; ++r) {
    const double* m = metas[static_cast<size_t>(r)].data_ptr<double>();
    fragments.emplace_back(reinterpret_cast<const char*>(all[static_cast<size_t>(r)].data_ptr<int64_t>()),
                           static_cast<size_t>(m[0]));
    summary.num_events.push_back(static_cast<int64_t>(m[1]));
    summary.comm_overlap.push_back(m[2]);
  }
  write_trace_file(path, chrome_trace_json(fragments));
  return summary;
}

std::string overlap_report(const DistributedTraceSummary& summary) {
  std::string out = "communication overlapped with computation:";
  for (size_t r = 0; r < summary.comm_overlap.size(); ++r) {
    char buf[64];
    const double o = summary.comm_overlap[r];
    if (o < 0) std::snprintf(buf, sizeof buf, "%s rank %zu none", r ? "," : "", r);
    else std::snprintf(buf, sizeof buf, "%s rank %zu %.1f%%", r ? "," : "", r, 100.0 * o);
    out += buf;
  }
  return out;
}

}  // namespace ember::profiler
