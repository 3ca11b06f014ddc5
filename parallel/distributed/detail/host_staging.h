// Host staging: CUDA tensors through a backend that moves host memory only (tcp), as Gloo does
// for CUDA tensors: the worker copies them to the host, runs the collective there and copies
// the results back. See Note [Host staging] in host_staging.cpp. Device-neutral; call from the
// threads named below.
#pragma once
#include <vector>

#include "core/tensor.h"

namespace ember::parallel::detail {

/// True when some tensor is not on the CPU (and so will be staged).
bool needs_staging(const std::vector<Tensor>& tensors);

/// In the caller's thread, before the operation is queued: blocks until the work queued on the
/// caller's current stream of every non-CPU tensor's device has finished (the values the worker
/// will copy are then final). Nothing for CPU tensors.
void wait_for_producers(const std::vector<Tensor>& tensors);

/// In the worker: host copies of `tensors` (contiguous, same dtype); a CPU tensor is itself.
std::vector<Tensor> host_copies(const std::vector<Tensor>& tensors);

/// In the worker, after the collective: copies host[i] into tensors[i] wherever host[i] is a
/// copy, and returns once those copies have finished on the devices.
void copy_back(const std::vector<Tensor>& tensors, const std::vector<Tensor>& host);

}  // namespace ember::parallel::detail
