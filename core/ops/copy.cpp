// Copies and conversions: copy_ (broadcast, cross-dtype, cross-device), to(), clone(), contiguous().
#include <cstring>

#include "core/kernels/cpu/loops.h"
#include "core/ops/detail/plan.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember::native {
namespace {

void cpu_cast(DType to_t, DType from_t, const kernels::ElementwisePlan& plan) {
  EMBER_DISPATCH_ALL(to_t, "copy_", [&] {
    using To = scalar_t;
    EMBER_DISPATCH_ALL(from_t, "copy_", [&] {
      kernels::cpu::cpu_kernel<To, scalar_t>(plan, kernels::CastF<To, scalar_t>{});
    });
  });
}

bool same_memory_layout(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.is_contiguous() && b.is_contiguous();
}

}  // namespace

Tensor& copy_(Tensor& self, const Tensor& src) {
  {
    IntList shape = broadcast_shapes(self.sizes(), src.sizes(), "copy_");
    EMBER_CHECK(shape == self.sizes(), "copy_: source of shape ", src.sizes(),
                " cannot be broadcast to the destination shape ", self.sizes());
  }
  if (self.numel() == 0) return self;
  Device sd = src.device(), dd = self.device();
  if (sd.is_cuda() || dd.is_cuda()) {
    auto& k = detail::require_cuda("copy_");
    if (sd != dd) {
      // Bring src to the destination's device as a dense tensor of the same dtype, then cast there.
      Tensor dense = contiguous(src.sizes() == self.sizes() ? src : expand(src, self.sizes()));
      if (dense.dtype() == self.dtype() && self.is_contiguous()) {
        k.copy_bytes(self.raw_data(), dd, dense.raw_data(), sd, self.nbytes());
        self.bump_version();
        return self;
      }
      Tensor staged = empty(dense.sizes(), TensorOptions(dense.dtype()).device(dd));
      k.copy_bytes(staged.raw_data(), dd, dense.raw_data(), sd, dense.nbytes());
      return copy_(self, staged);
    }
    k.cast(self.dtype(), src.dtype(), detail::make_plan(self, {&src}));
    self.bump_version();
    return self;
  }
  // CPU (any logical index: one address space).
  if (self.dtype() == src.dtype() && same_memory_layout(self, src)) {
    std::memcpy(self.raw_data(), src.raw_data(), self.nbytes());
  } else {
    cpu_cast(self.dtype(), src.dtype(), detail::make_plan(self, {&src}));
  }
  self.bump_version();
  return self;
}

Tensor to(const Tensor& a, DType dtype) {
  if (a.dtype() == dtype) return a;
  Tensor out = empty(a.sizes(), TensorOptions(dtype).device(a.device()));
  return copy_(out, a);
}

Tensor to(const Tensor& a, Device device) {
  if (a.device() == device) return a;
  Tensor out = empty(a.sizes(), TensorOptions(a.dtype()).device(device));
  return copy_(out, a);
}

Tensor to(const Tensor& a, Device device, DType dtype) {
  if (a.device() == device && a.dtype() == dtype) return a;
  Tensor out = empty(a.sizes(), TensorOptions(dtype).device(device));
  return copy_(out, a);
}

Tensor clone(const Tensor& a) {
  Tensor out = empty(a.sizes(), TensorOptions(a.dtype()).device(a.device()));
  return copy_(out, a);
}

Tensor contiguous(const Tensor& a) { return a.is_contiguous() ? a : clone(a); }

}  // namespace ember::native
