// A rank's state (ft::StateDict) sent to one peer over a process group's send/recv: a header
// (entries, tensor names, dtypes and shapes) and then every tensor in one send, so a replacement
// is brought up to date from a live peer without a checkpoint. Both calls block until done and
// throw DistributedError when the group fails meanwhile.
#pragma once
#include <cstdint>

#include "parallel/distributed/process_group.h"
#include "parallel/ft/manager.h"

namespace ember::parallel::ft {

/// The tag of the transfer's send/recv pairs.
inline constexpr int kStateTag = 0x7f5d;

/// Sends `state` (CPU tensors, contiguous or not) to rank `dst` of `group`; returns the bytes sent.
int64_t send_state(ProcessGroup& group, const StateDict& state, int dst);
/// Receives what send_state sent from rank `src`.
StateDict recv_state(ProcessGroup& group, int src);

}  // namespace ember::parallel::ft
