// The CUDA stream operations of a copy between devices (Note [Copies between devices] in
// core/ops/detail/peer_copy.h): events, stream waits, cudaMemcpyPeerAsync, each with its device
// current and checked with EMBER_CUDA_CHECK. Stateless and thread-safe.
#pragma once
#include "core/ops/detail/peer_copy.h"

namespace ember::cuda {

/// The process-wide CUDA implementation of PeerCopyOps.
const native::detail::PeerCopyOps& cuda_peer_copy_ops();

}  // namespace ember::cuda
