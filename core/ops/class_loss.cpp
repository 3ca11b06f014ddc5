// class_loss_forward / class_loss_backward (core/ops/nn_native.h): checks, host copies of the
// target and weight, dispatch on device. CPU kernels: core/kernels/cpu/class_loss.cpp; on CUDA
// one thread per row runs the functors of core/kernels/class_loss.h.
#include <cmath>

#include "core/kernels/class_loss.h"
#include "core/kernels/cpu/class_loss.h"
#include "core/ops/detail/plan.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::native {

// Note [Class-index loss kernels]
// cross_entropy and nll_loss over class indices view the input as [N, C, S] (S = product of
// the trailing dims d1...; 1 for [N, C]) and the target as [N * S]. On CPU in float32/float64
// nn's one autograd node calls class_loss_forward, which does log_softmax + gather + weighting + reduction forward, and backward rebuilds
// softmax from the saved per-row log-sum-exp instead of saving a [N, C] log-probability tensor.
// The loss sums are in double and run serially in row order, so results do not depend on the
// thread count. float32 rows with the class dim innermost take the row maximum and the sum of
// exp(x - max) in float vector lanes (core/kernels/cpu/softmax_rows.h; exp_approx, Note [Fast
// exp] in core/kernels/cpu/vec_math.h), then the log-sum-exp in double; everything else is in
// double. Per element (t the target, w[t] its weight, W_C = sum_c w_c, ls the label smoothing,
// lse the row's log-sum-exp):
//   l    = (1 - ls) * w[t] * (lse - x_t) + ls / C * sum_c w_c * (lse - x_c)
//   dl/dx_c = (1 - ls) * w[t] * (p_c - [c == t]) + ls / C * (W_C * p_c - w_c)
// and 'mean' divides the sum over non-ignored elements by sum w[t] over them, which is
// PyTorch's definition (nll_loss's weighted mean; label smoothing normalized the same way).
namespace {

struct Prepared {
  kernels::cpu::ClassLossRows rows;
  Tensor x, target, weight;  // contiguous; target int64, weight float64 (or undefined)
};

// `input` may be undefined (nll_loss's backward reads no input values): then only its sizes.
Prepared prepare(const IntList& sizes, DType dtype, Device device, const Tensor& input, const Tensor& target,
                 const Tensor& weight, int64_t ignore_index, double label_smoothing, const char* op) {
  EMBER_CHECK_T(TypeError, dtype == kFloat32 || dtype == kFloat64, op, ": expected float32 or float64 input, got ",
                dtype);
  // CPU devices share one address space; a CUDA input needs its target and weight on its device.
  auto same = [&](Device d) { return d.is_cpu() ? device.is_cpu() : d == device; };
  EMBER_CHECK(same(target.device()) && (!weight.defined() || same(weight.device())), op,
              ": expected input, target and weight on one device, got ", device, ", ", target.device(),
              weight.defined() ? ", " + weight.device().str() : std::string());
  EMBER_CHECK_T(ValueError, !sizes.empty(), op, ": expected 1 or more dimensions, got 0");
  Prepared p;
  if (input.defined()) p.x = contiguous(input);
  p.target = contiguous(target.dtype() == kInt64 ? target : to(target, kInt64));
  if (weight.defined()) p.weight = contiguous(to(weight, kFloat64));
  auto& r = p.rows;
  if (sizes.size() == 1) {
    r.N = 1;
    r.C = sizes[0];
  } else {
    r.N = sizes[0];
    r.C = sizes[1];
    for (size_t d = 2; d < sizes.size(); ++d) r.S *= sizes[d];
  }
  EMBER_CHECK_T(ValueError, p.target.numel() == r.N * r.S, op, ": expected ", r.N * r.S, " targets for input ",
                sizes, ", got ", p.target.numel());
  EMBER_CHECK_T(ValueError, !weight.defined() || weight.numel() == r.C, op, ": expected a weight of ", r.C,
                " classes, got ", weight.sizes());
  r.target = p.target.data_ptr<int64_t>();
  r.weight = p.weight.defined() ? p.weight.data_ptr<double>() : nullptr;
  r.ignore_index = ignore_index;
  r.label_smoothing = label_smoothing;
  return p;
}

// The CUDA functors' view of p (core/kernels/class_loss.h); reads sum(weight) back to the host.
kernels::ClassLossGeometry cuda_geometry(const Prepared& p) {
  const auto& r = p.rows;
  kernels::ClassLossGeometry g;
  g.N = r.N;
  g.C = r.C;
  g.S = r.S;
  g.target = r.target;
  g.weight = r.weight;
  g.ignore_index = r.ignore_index;
  g.label_smoothing = r.label_smoothing;
  g.wc_sum = p.weight.defined() ? sum(p.weight).item() : static_cast<double>(r.C);
  return g;
}

ClassLossForward class_loss_forward_cuda(const Prepared& p, DType dtype, Device device, bool from_logits,
                                         const char* op) {
  auto& k = detail::require_cuda(op);
  const auto& r = p.rows;
  const int64_t rows = r.N * r.S;
  Tensor slot = empty({1}, TensorOptions(kInt64).device(device));
  if (const int64_t bad = k.first_bad_target(r.target, rows, r.C, r.ignore_index, slot.raw_data(), device.index);
      bad >= 0) {
    EMBER_THROW(IndexError, "Target ", p.target.to_vector<int64_t>()[static_cast<size_t>(bad)], " is out of bounds.");
  }
  const TensorOptions f64 = TensorOptions(kFloat64).device(device);
  ClassLossForward out;
  out.loss = empty({rows}, f64);
  if (from_logits) out.lse = empty({rows}, f64);
  Tensor row_weight = empty({rows}, f64);
  k.class_loss_forward(dtype, cuda_geometry(p), from_logits, p.x.raw_data(), out.loss.data_ptr<double>(),
                       from_logits ? out.lse.data_ptr<double>() : nullptr, row_weight.data_ptr<double>(),
                       device.index);
  out.sum = rows == 0 ? 0.0 : sum(out.loss).item();
  out.total_weight = rows == 0 ? 0.0 : sum(row_weight).item();
  return out;
}

}  // namespace

ClassLossForward class_loss_forward(const Tensor& input, const Tensor& target, const Tensor& weight,
                                    int64_t ignore_index, double label_smoothing, bool from_logits) {
  const char* op = from_logits ? "cross_entropy" : "nll_loss";
  Prepared p = prepare(input.sizes(), input.dtype(), input.device(), input, target, weight, ignore_index,
                       label_smoothing, op);
  if (input.device().is_cuda()) return class_loss_forward_cuda(p, input.dtype(), input.device(), from_logits, op);
  auto& r = p.rows;
  const int64_t rows = r.N * r.S;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t t = r.target[i];
    if (t == ignore_index) continue;
    EMBER_CHECK_T(IndexError, t >= 0 && t < r.C, "Target ", t, " is out of bounds.");
  }
  ClassLossForward out;
  out.loss = empty({rows}, TensorOptions(kFloat64));
  double* loss = out.loss.data_ptr<double>();
  if (from_logits) {
    out.lse = empty({rows}, TensorOptions(kFloat64));
    r.lse = out.lse.data_ptr<double>();
    kernels::cpu::cross_entropy_forward(input.dtype(), p.x.raw_data(), r, loss);
  } else {
    kernels::cpu::nll_forward(input.dtype(), p.x.raw_data(), r, loss);
  }
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t t = r.target[i];
    if (t == ignore_index) continue;
    out.sum += loss[i];
    out.total_weight += r.weight != nullptr ? r.weight[t] : 1.0;
  }
  return out;
}

Tensor class_loss_backward(const IntList& input_sizes, DType dtype, const Tensor& logits, const Tensor& target,
                           const Tensor& weight, const Tensor& lse, const Tensor& grad_elem, double grad_scalar,
                           int64_t ignore_index, double label_smoothing, bool from_logits) {
  const char* op = from_logits ? "cross_entropy_backward" : "nll_loss_backward";
  EMBER_CHECK_T(ValueError, !from_logits || (logits.defined() && logits.sizes() == input_sizes), op,
                ": expected the forward's logits of shape ", input_sizes);
  const Device device = from_logits ? logits.device() : target.device();
  Prepared p = prepare(input_sizes, dtype, device, from_logits ? logits : Tensor(), target, weight, ignore_index,
                       label_smoothing, op);
  auto& r = p.rows;
  Tensor ge;
  if (grad_elem.defined()) {
    ge = contiguous(grad_elem.dtype() == dtype ? grad_elem : to(grad_elem, dtype));
    EMBER_CHECK_T(ValueError, ge.numel() == r.N * r.S, op, ": expected ", r.N * r.S, " loss gradients, got ",
                  ge.numel());
  }
  const TensorOptions opts = TensorOptions(dtype).device(device);
  Tensor gx;
  if (device.is_cuda()) {
    Tensor l;
    if (from_logits) {
      EMBER_CHECK_T(ValueError, lse.defined() && lse.dtype() == kFloat64 && lse.numel() == r.N * r.S, op,
                    ": expected the forward's float64 log-sum-exp of ", r.N * r.S, " rows");
      l = contiguous(lse);
    }
    gx = from_logits ? empty(input_sizes, opts) : zeros(input_sizes, opts);
    if (gx.numel() > 0) {
      detail::require_cuda(op).class_loss_backward(dtype, cuda_geometry(p), from_logits,
                                                   from_logits ? p.x.raw_data() : nullptr,
                                                   from_logits ? l.data_ptr<double>() : nullptr,
                                                   ge.defined() ? ge.raw_data() : nullptr, grad_scalar, gx.raw_data(),
                                                   device.index);
    }
    return gx;
  }
  if (from_logits) {
    EMBER_CHECK_T(ValueError, lse.defined() && lse.dtype() == kFloat64 && lse.numel() == r.N * r.S, op,
                  ": expected the forward's float64 log-sum-exp of ", r.N * r.S, " rows");
    Tensor l = contiguous(lse);
    r.lse = l.data_ptr<double>();
    gx = empty(input_sizes, opts);
    kernels::cpu::cross_entropy_backward(dtype, p.x.raw_data(), r, ge.defined() ? ge.raw_data() : nullptr,
                                         grad_scalar, gx.raw_data());
  } else {
    gx = zeros(input_sizes, opts);
    kernels::cpu::nll_backward(dtype, r, ge.defined() ? ge.raw_data() : nullptr, grad_scalar, gx.raw_data());
  }
  return gx;
}

}  // namespace ember::native
