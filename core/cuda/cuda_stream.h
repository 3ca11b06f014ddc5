// The CUDA side of core/stream.h: the calling thread's current cudaStream_t on a device (see
// Note [Current stream]). Thread-safe (the current stream is per host thread).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace ember::cuda {

/// The calling thread's current stream on cuda:device_index (nullptr: the legacy default stream).
cudaStream_t current_stream(int device_index);

inline cudaStream_t to_cuda_stream(uint64_t id) { return reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(id)); }

}  // namespace ember::cuda
