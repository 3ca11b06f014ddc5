// Context: what a tcp collective (tcp/all_reduce.cpp, ...) works with: the ranks, the
// mesh, the pipeline, scratch memory, the timeout, and the group's broken state. Owned by
// ProcessGroupTCP; used by its collective worker thread only, except GroupState, which
// every thread of the group may touch. See Note [tcp failures] in tcp/process_group_tcp.cpp.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "parallel/distributed/detail/broken_state.h"
#include "parallel/distributed/process_group.h"
#include "parallel/distributed/tcp/detail/mesh.h"
#include "parallel/distributed/tcp/detail/pipeline.h"

namespace ember::parallel::tcp::detail {

class SharedMemory;

/// The tcp group's BrokenState: the first break shuts every socket of the mesh down, so that
/// all blocked I/O (here and, through the closed connections, on the peers) ends at once.
class GroupState : public parallel::detail::BrokenState {
 public:
  explicit GroupState(Mesh* mesh) : BrokenState([mesh] { mesh->shutdown_all(); }) {}
};

struct Context {
  int rank = 0;
  int size = 1;
  int64_t timeout_ms = 0;
  size_t segment_bytes = 0;
  size_t block_bytes = 0;
  Mesh* mesh = nullptr;
  Pipeline* pipeline = nullptr;
  GroupState* state = nullptr;
  /// Every rank's pid when the same-host fast path is on (tcp/detail/cma.h), else empty.
  std::vector<pid_t> cma_pids;
  /// all_reduce of at least this many bytes takes the same-host path when it is on.
  size_t cma_min_bytes = 0;
  /// The ranks' shared-memory segments when that path is on (tcp/detail/shm.h), else null;
  /// every all_reduce then runs through them.
  SharedMemory* shm = nullptr;

  int next() const { return (rank + 1) % size; }
  int prev() const { return (rank + size - 1) % size; }
  int peer_at(int offset) const { return ((rank + offset) % size + size) % size; }
  Socket& socket(int peer) { return mesh->socket(peer, kCollectiveChannel); }
  Clock::time_point deadline() const { return Clock::now() + std::chrono::milliseconds(timeout_ms); }

  /// Runs plan on the pipeline; on failure breaks the group and throws DistributedError
  /// naming this rank, the operation, the peer and what happened.
  void run(const OpInfo& info, PipelinePlan& plan);
  /// The Pipeline's abort hook: breaks the group with the failure of the running op.
  void on_pipeline_failure(const PipelineFailure& f);

  /// Reusable buffers of at least n bytes (contents undefined). `tmp` holds one received
  /// segment; `scratch` partial results.
  uint8_t* tmp(size_t n);
  uint8_t* scratch(size_t n);

 private:
  const OpInfo* current_ = nullptr;  // the op in run(), for on_pipeline_failure
  std::string failure_message_;      // set by on_pipeline_failure when it broke the group
  std::vector<uint8_t> tmp_;
  std::vector<uint8_t> scratch_;
};

/// The message for a failed pipeline: "... failed: receiving from rank 1: ...".
std::string describe_failure(const OpInfo& info, const PipelineFailure& f, int64_t timeout_ms);

/// Splits n elements into `parts` nearly equal ranges: part c is [begin(c), begin(c+1)).
inline int64_t part_begin(int64_t n, int parts, int c) { return n / parts * c + std::min<int64_t>(c, n % parts); }

}  // namespace ember::parallel::tcp::detail
