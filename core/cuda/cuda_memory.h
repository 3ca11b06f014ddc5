// The raw device memory behind the caching allocator for cuda:N (see Note [Caching allocator]
// in core/allocator.cpp): cudaMalloc / cudaFree on the right device, cudaMemGetInfo capacity and
// free memory, the reason of a cudaMalloc failure that is not out-of-memory, and the events of
// Note [Stream-aware frees]. The functions never throw; failures return nullptr / 0 so the
// allocator can free its cache, retry and raise its own error. Thread-safe.
#pragma once
#include "core/allocator.h"
#include "core/pinned_memory.h"

namespace ember::cuda {

ember::detail::RawMemoryBackend cuda_raw_memory_backend();
/// cudaHostAlloc / cudaFreeHost and the same events, for core/pinned_memory.h.
ember::detail::PinnedMemoryBackend cuda_pinned_memory_backend();

}  // namespace ember::cuda
