// total_norm and scale_all_ (core/ops/nn_native.h): the one-pass gradient norm behind
// clip_grad_norm_. CPU kernel: core/kernels/cpu/norm.cpp; on CUDA one CUB reduction over all
// tensors of a device and one multi-tensor scaling launch (core/kernels/cuda/multi_tensor.cu). The term
// and combine functions are core/kernels/norm.h's on both.
#include <cmath>
#include <map>
#include <vector>

#include "core/kernels/cpu/norm.h"
#include "core/kernels/norm.h"
#include "core/ops/detail/plan.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::native {
namespace {

bool is_float(const Tensor& t) { return t.dtype() == kFloat32 || t.dtype() == kFloat64; }

kernels::MultiTensorEntry entry_of(const Tensor& t) {
  kernels::MultiTensorEntry e;
  e.ptr[0] = t.raw_data();
  e.numel = t.numel();
  e.is_f64 = t.dtype() == kFloat64 ? 1 : 0;
  return e;
}

kernels::cpu::NormSpan span_of(const Tensor& t) { return {t.dtype(), t.raw_data(), t.numel()}; }

}  // namespace

double total_norm(const std::vector<Tensor>& tensors, double norm_type) {
  const kernels::NormReduce kind = kernels::norm_reduce_kind(norm_type);
  const kernels::NormCombineF combine{kind};
  double acc = kernels::norm_identity(kind);
  bool any = false;
  std::vector<Tensor> on_cpu;                  // contiguous float copies, kept alive for the pass
  std::map<int, std::vector<Tensor>> on_cuda;  // contiguous float copies per CUDA device
  for (const Tensor& t0 : tensors) {
    if (!t0.defined() || t0.numel() == 0) continue;
    any = true;
    Tensor t = contiguous(is_float(t0) ? t0 : to(t0, kFloat64));
    if (t.device().is_cuda()) {
      on_cuda[t.device().index].push_back(t);
      continue;
    }
    EMBER_CHECK_T(NotImplementedError, t.device().is_cpu(), "total_norm: no kernel for ", t.device());
    on_cpu.push_back(std::move(t));
  }
  // One parallel pass over all CPU tensors (Note [One pass over many tensors]), combined in
  // tensor then chunk order.
  std::vector<kernels::cpu::NormSpan> spans;
  for (const Tensor& t : on_cpu) spans.push_back(span_of(t));
  for (double v : kernels::cpu::norm_partials(spans, norm_type)) acc = combine(acc, v);
  for (const auto& [device_index, ts] : on_cuda) {
    std::vector<kernels::MultiTensorEntry> entries;
    for (const Tensor& t : ts) entries.push_back(entry_of(t));
    acc = combine(acc, detail::require_cuda("total_norm")
                           .multi_tensor_norm(entries.data(), static_cast<int64_t>(entries.size()), norm_type,
                                              device_index));
  }
  return any ? kernels::finish_norm(acc, norm_type) : 0.0;
}

void scale_all_(const std::vector<Tensor>& tensors, double scale) {
  std::vector<Tensor> on_cpu;
  std::map<int, std::vector<Tensor>> on_cuda;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    Tensor h = t;
    const bool dense = h.is_contiguous() && is_float(h);
    if (dense && h.device().is_cpu()) {
      on_cpu.push_back(h);
    } else if (dense && h.device().is_cuda() && detail::cuda_kernels() != nullptr) {
      on_cuda[h.device().index].push_back(h);
    } else {
      mul_(h, scale);
    }
  }
  std::vector<kernels::cpu::NormSpan> spans;
  for (const Tensor& t : on_cpu) spans.push_back(span_of(t));
  kernels::cpu::scale_inplace(spans, scale);  // one parallel pass over all of them
  for (Tensor& t : on_cpu) t.bump_version();
  for (const auto& [device_index, ts] : on_cuda) {
    std::vector<kernels::MultiTensorEntry> entries;
    for (const Tensor& t : ts) entries.push_back(entry_of(t));
    detail::require_cuda("scale_all_")
        .multi_tensor_scale(entries.data(), static_cast<int64_t>(entries.size()), scale, device_index);
    for (const Tensor& t : ts) t.bump_version();
  }
}

}  // namespace ember::native
