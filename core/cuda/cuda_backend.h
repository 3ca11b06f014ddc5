// The entry point by which ember_core installs its CUDA backend: raw device memory for the
// caching allocator and the CUDA kernels of the ops' dispatch stubs. Device-neutral: this
// header includes no CUDA headers, so core code calls it whether or not CUDA is built.
#pragma once

namespace ember::detail {

/// Registers the CUDA raw-memory backend and the CUDA kernels once per process (later calls
/// return at once). Called lazily by get_allocator(cuda:N), a stub's first CUDA dispatch and
/// cuda_device_count(); a no-op when ember is built without CUDA (core/device.cpp).
/// Thread-safe; never touches a GPU itself, so it is cheap and works with no device present.
void register_cuda_backend();

}  // namespace ember::detail
