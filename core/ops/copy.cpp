// Copies and conversions: copy_ (broadcast, cross-dtype, cross-device), to(), clone(), contiguous(),
// pin_memory(). Host<->device copies and pinned memory: Note [Pinned host memory].
#include <algorithm>
#include <cstring>

#include "core/ops/copy_stubs.h"
#include "core/ops/detail/plan.h"
#include "core/ops/elementwise_stubs.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/pinned_memory.h"

namespace ember::native {

detail::DispatchStub<CopyBytesFn> copy_bytes_stub;

namespace {

// num_bytes of pinned host memory (a block of at least one byte, so that an empty tensor is
// pinned too). Throws DeviceError without a CUDA device.
Storage pinned_storage(size_t num_bytes) {
  return Storage(pinned_allocator().allocate(std::max<size_t>(num_bytes, 1)), num_bytes);
}

// A contiguous CPU tensor in pinned host memory.
Tensor empty_pinned(const IntList& sizes, DType dtype) {
  const size_t num_bytes = static_cast<size_t>(numel_of(sizes, "pin_memory")) * element_size(dtype);
  return make_tensor(pinned_storage(num_bytes), sizes, contiguous_strides(sizes, "pin_memory"), 0, dtype,
                     "pin_memory");
}

// Whether a dense byte copy between `host` and the CUDA device `device` may run without waiting
// for itself (records the device's current stream on a pinned block; see Note [Pinned host memory]).
bool async_copy(const Tensor& host, Device device, bool non_blocking) {
  return ember::detail::prepare_async_host_copy(host.storage(), current_stream(device), non_blocking);
}

}  // namespace

Tensor& copy_(Tensor& self, const Tensor& src, bool non_blocking) {
  {
    IntList shape = broadcast_shapes(self.sizes(), src.sizes(), "copy_");
    EMBER_CHECK(shape == self.sizes(), "copy_: source of shape ", src.sizes(),
                " cannot be broadcast to the destination shape ", self.sizes());
  }
  if (self.numel() == 0) return self;
  Device sd = src.device(), dd = self.device();
  // Logical CPU devices share one address space: only a copy with a CUDA side moves bytes between
  // devices, through the kernel of that side.
  if ((sd.is_cuda() || dd.is_cuda()) && sd != dd) {
    const CopyBytesFn* copy_bytes = copy_bytes_stub.kernel(sd.is_cuda() ? sd : dd, "copy_");
    {
      // Bring src to the destination's device as a dense tensor of the same dtype, then cast there.
      // A copy with a host side runs asynchronously only when that side is pinned memory
      // (never a temporary made here: a non-contiguous source is staged in pageable memory).
      Tensor dense = contiguous(src.sizes() == self.sizes() ? src : expand(src, self.sizes()));
      if (dense.dtype() == self.dtype() && self.is_contiguous()) {
        const bool async = dd.is_cpu()   ? async_copy(self, sd, non_blocking)
                           : sd.is_cpu() ? async_copy(dense, dd, non_blocking)
                                         : non_blocking;  // between GPUs: Note [Copies between devices]
        copy_bytes(self.raw_data(), dd, dense.raw_data(), sd, self.nbytes(), async);
        self.bump_version();
        return self;
      }
      // Convert on the destination's device: from a pinned source the upload may run
      // asynchronously (the cast follows it on the same stream); a download lands in pageable
      // staging memory first and waits; a copy between GPUs is as above.
      Tensor staged = empty(dense.sizes(), TensorOptions(dense.dtype()).device(dd));
      const bool async = sd.is_cpu() ? async_copy(dense, dd, non_blocking) : dd.is_cuda() && non_blocking;
      copy_bytes(staged.raw_data(), dd, dense.raw_data(), sd, dense.nbytes(), async);
      return copy_(self, staged, non_blocking);
    }
  }
  cast_stub.kernel(dd, "copy_")(self.dtype(), src.dtype(), detail::make_plan(self, {&src}));
  self.bump_version();
  return self;
}

Tensor to(const Tensor& a, DType dtype) {
  if (a.dtype() == dtype) return a;
  Tensor out = empty(a.sizes(), TensorOptions(dtype).device(a.device()));
  return copy_(out, a);
}

Tensor to(const Tensor& a, Device device, bool non_blocking) { return to(a, device, a.dtype(), non_blocking); }

Tensor to(const Tensor& a, Device device, DType dtype, bool non_blocking) {
  if (a.device() == device && a.dtype() == dtype) return a;
  // As PyTorch: a non-blocking download lands in pinned memory, so it can be asynchronous.
  Tensor out = non_blocking && a.device().is_cuda() && device.is_cpu()
                   ? empty_pinned(a.sizes(), dtype)
                   : empty(a.sizes(), TensorOptions(dtype).device(device));
  return copy_(out, a, non_blocking);
}

Tensor pin_memory(const Tensor& a) {
  EMBER_CHECK_T(ValueError, a.device().is_cpu(), "pin_memory: cannot pin a tensor on ", a.device(),
                ": only CPU tensors can be pinned");
  if (a.is_pinned()) return a;
  // As PyTorch's pin_memory, the copy keeps a's sizes and strides (a transposed tensor stays
  // transposed, an expanded one keeps its 0 strides) at storage offset 0: its storage holds
  // a's whole strided extent, from a's first element to the last one its geometry reaches,
  // copied byte for byte (the gaps a view skips come along; nothing is read twice or written
  // twice, however the strides overlap).
  int64_t extent = 0;  // in elements; bounded by a's storage (make_tensor checked it)
  if (a.numel() > 0) {
    extent = 1;
    for (int64_t d = 0; d < a.dim(); ++d) extent += (a.size(d) - 1) * a.stride(d);
  }
  const size_t num_bytes = static_cast<size_t>(extent) * element_size(a.dtype());
  Storage storage = pinned_storage(num_bytes);
  if (num_bytes > 0) std::memcpy(storage.data(), a.raw_data(), num_bytes);
  return make_tensor(std::move(storage), a.sizes(), a.strides(), 0, a.dtype(), "pin_memory");
}

Tensor clone(const Tensor& a) {
  Tensor out = empty(a.sizes(), TensorOptions(a.dtype()).device(a.device()));
  return copy_(out, a);
}

Tensor contiguous(const Tensor& a) { return a.is_contiguous() ? a : clone(a); }

}  // namespace ember::native
