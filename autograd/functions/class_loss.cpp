// The fused class-index losses' autograd function: see autograd/functions/class_loss.h.
#include "autograd/functions/class_loss.h"

#include "autograd/node.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::autograd::functions {

Tensor class_loss(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                  Reduction reduction, double label_smoothing, bool from_logits, const IntList& out_sizes) {
  const bool ce = from_logits;
  const char* name = ce ? "CrossEntropyLossBackward0" : "NllLossBackward0";
  native::ClassLossForward f = native::class_loss_forward(input, target, weight, ignore_index, label_smoothing, ce);
  Tensor out;
  if (reduction == Reduction::None) {
    out = native::reshape(native::to(f.loss, input.device(), input.dtype()), out_sizes);
  } else {
    double v = reduction == Reduction::Sum ? f.sum : f.sum / f.total_weight;
    out = scalar_tensor(v, TensorOptions(input.dtype()).device(input.device()));
  }
  if (any_requires_grad({&input})) {
    SavedVariable sx(ce ? input : Tensor());
    record(name, {&input}, {&out},
           [sx, target, weight, lse = f.lse, tw = f.total_weight, ignore_index, label_smoothing, reduction, ce, name,
            sizes = input.sizes(), dt = input.dtype()](FunctionNode&, TensorList& g) {
             const bool per_elem = reduction == Reduction::None;
             double gs = per_elem ? 0.0 : g[0].item();
             if (reduction == Reduction::Mean) gs /= tw;
             Tensor logits = ce ? sx.unpack(name) : Tensor();
             return TensorList{native::class_loss_backward(sizes, dt, logits, target, weight, lse,
                                                           per_elem ? g[0] : Tensor(), gs, ignore_index,
                                                           label_smoothing, ce)};
           });
  }
  return out;
}

}  // namespace ember::autograd::functions
