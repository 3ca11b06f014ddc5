// class_loss_forward / class_loss_backward (core/ops/nn_native.h): checks, the target and weight
// on the input's device, dispatch through the stubs of core/ops/class_loss_stubs.h.
#include "core/ops/class_loss_stubs.h"

#include "core/ops/detail/plan.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::native {

detail::DispatchStub<FirstBadTargetFn> first_bad_target_stub;
detail::DispatchStub<ClassLossForwardFn> class_loss_forward_stub;
detail::DispatchStub<ClassLossBackwardFn> class_loss_backward_stub;

// Note [Class-index loss kernels]
// cross_entropy and nll_loss over class indices view the input as [N, C, S] (S = product of
// the trailing dims d1...; 1 for [N, C]) and the target as [N * S]. nn's one autograd node calls
// class_loss_forward, which does log_softmax + gather + weighting per row in one kernel, and
// backward rebuilds softmax from the saved per-row log-sum-exp instead of saving a [N, C]
// log-probability tensor. Per-row values are in double; the loss sum and total weight are then
// sum() over the rows (serial, in row order, in double on CPU), so results do not depend on the
// thread count. On CPU, float32 rows with the class dim innermost take the row maximum and the
// sum of exp(x - max) in float vector lanes (core/kernels/cpu/softmax_rows.h; exp_approx, Note
// [Fast exp] in core/kernels/cpu/vec_math.h), then the log-sum-exp in double; every other case
// runs the row functors of core/kernels/class_loss.h, in double. Per element (t the target, w[t] its weight, W_C = sum_c w_c, ls the label smoothing,
// lse the row's log-sum-exp):
//   l    = (1 - ls) * w[t] * (lse - x_t) + ls / C * sum_c w_c * (lse - x_c)
//   dl/dx_c = (1 - ls) * w[t] * (p_c - [c == t]) + ls / C * (W_C * p_c - w_c)
// and 'mean' divides the sum over non-ignored elements by sum w[t] over them, which is
// PyTorch's definition (nll_loss's weighted mean; label smoothing normalized the same way).
namespace {

struct Prepared {
  kernels::ClassLossGeometry g;
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
  auto& g = p.g;
  if (sizes.size() == 1) {
    g.N = 1;
    g.C = sizes[0];
  } else {
    g.N = sizes[0];
    g.C = sizes[1];
    for (size_t d = 2; d < sizes.size(); ++d) g.S *= sizes[d];
  }
  EMBER_CHECK_T(ValueError, p.target.numel() == g.N * g.S, op, ": expected ", g.N * g.S, " targets for input ",
                sizes, ", got ", p.target.numel());
  EMBER_CHECK_T(ValueError, !weight.defined() || weight.numel() == g.C, op, ": expected a weight of ", g.C,
                " classes, got ", weight.sizes());
  g.target = p.target.data_ptr<int64_t>();
  g.weight = p.weight.defined() ? p.weight.data_ptr<double>() : nullptr;
  g.ignore_index = ignore_index;
  g.label_smoothing = label_smoothing;
  g.wc_sum = p.weight.defined() ? sum(p.weight).item() : static_cast<double>(g.C);
  return p;
}

}  // namespace

ClassLossForward class_loss_forward(const Tensor& input, const Tensor& target, const Tensor& weight,
                                    int64_t ignore_index, double label_smoothing, bool from_logits) {
  const char* op = from_logits ? "cross_entropy" : "nll_loss";
  const Device device = input.device();
  Prepared p = prepare(input.sizes(), input.dtype(), device, input, target, weight, ignore_index, label_smoothing, op);
  const auto& g = p.g;
  const int64_t rows = g.N * g.S;
  Tensor slot = empty({1}, TensorOptions(kInt64).device(device));
  if (const int64_t bad = first_bad_target_stub.kernel(device, op)(g.target, rows, g.C, g.ignore_index,
                                                                   slot.raw_data(), device.index);
      bad >= 0) {
    EMBER_THROW(IndexError, op, ": Target ", p.target.to_vector<int64_t>()[static_cast<size_t>(bad)],
                " is out of bounds. Expected a class in [0, ", g.C, ") or ignore_index (", g.ignore_index, ")");
  }
  const TensorOptions f64 = TensorOptions(kFloat64).device(device);
  ClassLossForward out;
  out.loss = empty({rows}, f64);
  if (from_logits) out.lse = empty({rows}, f64);
  Tensor row_weight = empty({rows}, f64);
  class_loss_forward_stub.kernel(device, op)(input.dtype(), g, from_logits, p.x.raw_data(),
                                             out.loss.data_ptr<double>(),
                                             from_logits ? out.lse.data_ptr<double>() : nullptr,
                                             row_weight.data_ptr<double>(), device.index);
  out.sum = rows == 0 ? 0.0 : sum(out.loss).item();
  out.total_weight = rows == 0 ? 0.0 : sum(row_weight).item();
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
  const auto& g = p.g;
  Tensor ge;
  if (grad_elem.defined()) {
    ge = contiguous(grad_elem.dtype() == dtype ? grad_elem : to(grad_elem, dtype));
    EMBER_CHECK_T(ValueError, ge.numel() == g.N * g.S, op, ": expected ", g.N * g.S, " loss gradients, got ",
                  ge.numel());
  }
  Tensor l;
  if (from_logits) {
    EMBER_CHECK_T(ValueError, lse.defined() && lse.dtype() == kFloat64 && lse.numel() == g.N * g.S, op,
                  ": expected the forward's float64 log-sum-exp of ", g.N * g.S, " rows");
    l = contiguous(lse);
  }
  const TensorOptions opts = TensorOptions(dtype).device(device);
  Tensor gx = from_logits ? empty(input_sizes, opts) : zeros(input_sizes, opts);
  if (gx.numel() > 0) {
    class_loss_backward_stub.kernel(device, op)(dtype, g, from_logits, from_logits ? p.x.raw_data() : nullptr,
                                                from_logits ? l.data_ptr<double>() : nullptr,
                                                ge.defined() ? ge.raw_data() : nullptr, grad_scalar, gx.raw_data(),
                                                device.index);
  }
  return gx;
}

}  // namespace ember::native
