// total_norm and scale_all_ (core/ops/nn_native.h): the one-pass gradient norm behind
// clip_grad_norm_. One multi-tensor call per device through the stubs of
// core/ops/multi_tensor_stubs.h (CPU: one parallel pass over all its tensors; CUDA: one CUB
// reduction and one scaling launch), the CPU device first. The term and combine functions are
// core/kernels/norm.h's on both.
#include <map>
#include <utility>
#include <vector>

#include "core/kernels/norm.h"
#include "core/ops/multi_tensor_stubs.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::native {

detail::DispatchStub<MultiTensorNormFn> multi_tensor_norm_stub;
detail::DispatchStub<MultiTensorScaleFn> multi_tensor_scale_stub;

namespace {

bool is_float(const Tensor& t) { return t.dtype() == kFloat32 || t.dtype() == kFloat64; }

kernels::MultiTensorEntry entry_of(const Tensor& t) {
  kernels::MultiTensorEntry e;
  e.ptr[0] = t.raw_data();
  e.numel = t.numel();
  e.is_f64 = t.dtype() == kFloat64 ? 1 : 0;
  return e;
}

// Tensors per device, the CPU first, then CUDA devices by index.
using PerDevice = std::map<std::pair<DeviceType, int>, std::vector<Tensor>>;

std::vector<kernels::MultiTensorEntry> entries_of(const std::vector<Tensor>& ts) {
  std::vector<kernels::MultiTensorEntry> entries;
  entries.reserve(ts.size());
  for (const Tensor& t : ts) entries.push_back(entry_of(t));
  return entries;
}

}  // namespace

double total_norm(const std::vector<Tensor>& tensors, double norm_type) {
  const kernels::NormReduce kind = kernels::norm_reduce_kind(norm_type);
  const kernels::NormCombineF combine{kind};
  double acc = kernels::norm_identity(kind);
  bool any = false;
  PerDevice groups;  // contiguous float copies, kept alive for the pass
  for (const Tensor& t0 : tensors) {
    if (!t0.defined() || t0.numel() == 0) continue;
    any = true;
    Tensor t = contiguous(is_float(t0) ? t0 : to(t0, kFloat64));
    groups[{t.device().type, t.device().index}].push_back(std::move(t));
  }
  // Within a device the partial results combine in tensor then chunk order (Note [One pass over
  // many tensors]), so the result does not depend on the thread count.
  for (const auto& [key, ts] : groups) {
    const Device device(key.first, key.second);
    const auto entries = entries_of(ts);
    acc = combine(acc, multi_tensor_norm_stub.kernel(device, "total_norm")(
                           entries.data(), static_cast<int64_t>(entries.size()), norm_type, device.index));
  }
  return any ? kernels::finish_norm(acc, norm_type) : 0.0;
}

void scale_all_(const std::vector<Tensor>& tensors, double scale) {
  PerDevice groups;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    Tensor h = t;
    if (h.is_contiguous() && is_float(h) && multi_tensor_scale_stub.has_kernel(h.device().type)) {
      groups[{h.device().type, h.device().index}].push_back(h);
    } else {
      mul_(h, scale);
    }
  }
  for (const auto& [key, ts] : groups) {
    const Device device(key.first, key.second);
    const auto entries = entries_of(ts);
    multi_tensor_scale_stub.kernel(device, "scale_all_")(entries.data(), static_cast<int64_t>(entries.size()), scale,
                                                         device.index);
    for (const Tensor& t : ts) t.bump_version();
  }
}

}  // namespace ember::native
