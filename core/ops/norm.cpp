// total_norm and scale_all_ (core/ops/nn_native.h): the one-pass gradient norm behind
// clip_grad_norm_. CPU kernel: core/kernels/cpu/norm.cpp.
#include <cmath>
#include <vector>

#include "core/kernels/cpu/norm.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::native {

double total_norm(const std::vector<Tensor>& tensors, double norm_type) {
  const bool inf = std::isinf(norm_type);
  double acc = inf && norm_type < 0 ? INFINITY : 0.0;
  bool any = false;
  std::vector<double> partials;
  for (const Tensor& t0 : tensors) {
    if (!t0.defined() || t0.numel() == 0) continue;
    EMBER_CHECK_T(NotImplementedError, t0.device().is_cpu(), "total_norm: no kernel for ", t0.device(), " yet");
    Tensor t = contiguous(t0.dtype() == kFloat32 || t0.dtype() == kFloat64 ? t0 : to(t0, kFloat64));
    partials.assign(static_cast<size_t>((t.numel() + kernels::cpu::kNormChunk - 1) / kernels::cpu::kNormChunk), 0.0);
    kernels::cpu::norm_partials(t.dtype(), t.raw_data(), t.numel(), norm_type, partials.data());
    for (double v : partials) {
      if (!inf) {
        acc += v;
      } else if (std::isnan(v) || std::isnan(acc)) {
        acc = NAN;
      } else {
        acc = norm_type > 0 ? std::max(acc, v) : std::min(acc, v);
      }
    }
    any = true;
  }
  if (!any) return 0.0;
  if (inf) return acc;
  if (norm_type == 1.0) return acc;
  if (norm_type == 2.0) return std::sqrt(acc);
  return std::pow(acc, 1.0 / norm_type);
}

void scale_all_(const std::vector<Tensor>& tensors, double scale) {
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    Tensor h = t;
    if (h.device().is_cpu() && h.is_contiguous() && (h.dtype() == kFloat32 || h.dtype() == kFloat64)) {
      kernels::cpu::scale_inplace(h.dtype(), h.raw_data(), h.numel(), scale);
      h.bump_version();
    } else {
      mul_(h, scale);
    }
  }
}

}  // namespace ember::native
