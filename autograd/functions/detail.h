// Helpers shared by the differentiable op files in autograd/functions/.
#pragma once
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/ops/native.h"

namespace ember::autograd::detail {

/// What backward needs to know about an input to shape its gradient.
struct InputMeta {
  IntList sizes;
  DType dtype = kFloat32;
  Device device;
  InputMeta() = default;
  explicit InputMeta(const Tensor& t) : sizes(t.sizes()), dtype(t.dtype()), device(t.device()) {}
};

/// Sums a broadcast gradient back to the input's shape and casts to its dtype.
inline Tensor reduce_grad(const Tensor& g, const InputMeta& m) {
  Tensor r = g.sizes() == m.sizes ? g : native::sum_to_size(g, m.sizes);
  if (r.dtype() != m.dtype && is_floating_point(m.dtype)) r = native::to(r, m.dtype);
  return r;
}

/// Throws the PyTorch error for an in-place op on a leaf that requires grad (or a view of one).
void check_inplace(const Tensor& self, const char* op);
/// After an in-place op on `self` computed with native ops: record `node` as its new history.
void rebase_history(Tensor& self, const std::shared_ptr<FunctionNode>& node);

/// The gradients of (a, b) for an op whose output takes a's element where `pick_a`, else b's
/// (where, maximum, minimum): g routed by the mask, each summed to its input's shape.
TensorList route_by_mask(const FunctionNode& n, const Tensor& pick_a, const Tensor& g, const InputMeta& ma,
                         const InputMeta& mb);

}  // namespace ember::autograd::detail

namespace ember {
// The names the op files of this folder use; the ops themselves are in namespace ember.
using autograd::FunctionNode;
using autograd::record;
using autograd::SavedVariable;
using autograd::TensorList;
using autograd::detail::InputMeta;
using autograd::detail::reduce_grad;
}  // namespace ember
