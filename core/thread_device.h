// Device-owning threads: a thread that works for one device all its life makes it its own
// (Note [Device-owning threads]). Device-neutral; the CUDA call is in core/cuda/cuda_stream.cpp.
// Thread-safe (the state is per thread).
#pragma once
#include <optional>

#include "core/device.h"

namespace ember {

// Note [Device-owning threads]
// A thread that works for one device all its life (an autograd engine worker, Note [Engine
// threads] in autograd/engine.cpp; a DataParallel replica thread, Note [Replica threads] in
// parallel/parallel_apply.cpp) calls set_thread_device once when it starts: on CUDA that makes
// the device current (cudaSetDevice) for the whole thread, so nothing it runs pays for or
// forgets a device switch, and thread_device() names the device for the thread's life (CPU
// devices too, so the bookkeeping is tested on CPU). Streams follow the thread that hands out
// the work: a replica job runs under the caller's current stream of its device, and an engine
// worker runs each node under the current stream its backward() caller had on the node's device
// (StreamGuard for the job or node), as PyTorch's parallel_apply and engine do.

/// Makes `device` the calling thread's own device for the rest of its life (see Note
/// [Device-owning threads]); on CUDA also the current device. Throws DeviceError when a CUDA
/// device does not exist or ember was built without CUDA.
void set_thread_device(Device device);
/// The device set_thread_device gave the calling thread, if any.
std::optional<Device> thread_device();

namespace detail {
/// cudaSetDevice(device_index), checked (core/cuda/cuda_stream.cpp; throws without CUDA).
void cuda_set_thread_device(int device_index);
}  // namespace detail

}  // namespace ember
