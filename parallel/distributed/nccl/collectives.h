// The nccl backend's operations, one per file, mirroring tcp/ and mpi/: each enqueues NCCL
// calls (and, where NCCL needs one contiguous buffer, device copies) on the group's stream
// and returns at once. Temporary device buffers go into `keep`, which the Work holds until
// the stream passed them. Throw DistributedError via EMBER_NCCL_CHECK.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "parallel/distributed/nccl/detail/nccl_types.h"
#include "parallel/distributed/process_group.h"

namespace ember::parallel::nccl {

struct Comm {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int rank = 0;
  int size = 1;
  int device = 0;
  std::chrono::steady_clock::time_point deadline;  // for calls in progress (non-blocking comm)
};

void all_reduce(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, ReduceOp op);
void broadcast(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, int root);
void reduce(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, int root, ReduceOp op);
void all_gather(const Comm& c, const OpInfo& info, std::vector<Tensor>& outputs, const Tensor& input,
                std::vector<Tensor>& keep);
void reduce_scatter(const Comm& c, const OpInfo& info, Tensor& output, std::vector<Tensor>& inputs, ReduceOp op,
                    std::vector<Tensor>& keep);
void barrier(const Comm& c, const OpInfo& info, std::vector<Tensor>& keep);
void send(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, int dst);
void recv(const Comm& c, const OpInfo& info, std::vector<Tensor>& tensors, int src);

/// Runs `expr` and settles it (the communicator is non-blocking); still in progress at the
/// deadline is a DistributedError.
#define EMBER_NCCL_CALL(c, expr, who)                                                                     \
  ::ember::parallel::nccl::detail::check_settled(                                                         \
      ::ember::parallel::nccl::detail::settle((c).comm, (expr), (c).deadline), #expr, (who), EMBER_SOURCE_FILE, __LINE__)

/// One NCCL group on the calling thread: ncclGroupStart (settled) on construction, ncclGroupEnd
/// (settled) in end(). When a call inside the group throws, the destructor closes the group
/// (ncclGroupEnd, its result ignored) while the communicator is still alive: the thread's NCCL
/// group depth must be back at zero before launch() aborts the communicator, and before this
/// thread's next NCCL call (regression: left open, every later call on any communicator from the
/// thread was deferred into the dead group and never launched).
class Group {
 public:
  Group(const Comm& c, const std::string& who) : c_(c), who_(who) {
    EMBER_NCCL_CALL(c_, ncclGroupStart(), who_);
  }
  void end() {
    open_ = false;  // ncclGroupEnd closes the group even when it fails
    EMBER_NCCL_CALL(c_, ncclGroupEnd(), who_);
  }
  ~Group() {
    if (open_) static_cast<void>(ncclGroupEnd());
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

 private:
  const Comm& c_;
  const std::string& who_;
  bool open_ = true;
};

}  // namespace ember::parallel::nccl
