// The dispatch stub of copies between devices (core/ops/copy.cpp; Note [Dispatch stubs]). A copy
// within one device is a cast (cast_stub, core/ops/elementwise_stubs.h). Kernel:
// core/kernels/cuda/copy.cpp (CPU has one address space and needs none).
#pragma once
#include <cstddef>

#include "core/device.h"
#include "core/ops/detail/dispatch_stub.h"

namespace ember::native {

/// Copies num_bytes between any two devices (host<->device, device<->device) on the CUDA side's
/// current stream. A copy with a host side waits for itself unless `async` (the host side is
/// pinned and its use recorded: Note [Pinned host memory]); one between two GPUs is ordered with
/// both current streams and waits unless `async` (non_blocking; Note [Copies between devices]).
using CopyBytesFn = void(void* dst, Device dst_device, const void* src, Device src_device, size_t num_bytes,
                         bool async);

extern detail::DispatchStub<CopyBytesFn> copy_bytes_stub;

}  // namespace ember::native
