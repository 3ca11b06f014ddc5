// The autograd functions of the layer ops: see autograd/functions/nn_layers.h.
#include "autograd/functions/nn_layers.h"

#include "autograd/node.h"
#include "core/detail/checked_math.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::autograd::functions {

Tensor embedding(const Tensor& input, const Tensor& weight, int64_t padding_idx) {
  const int64_t num = weight.sizes()[0];
  Tensor out = native::embedding_forward(weight, input);
  record("EmbeddingBackward0", {&weight}, {&out},
         [input, num, padding_idx, dt = weight.dtype(), dev = weight.device()](FunctionNode&, TensorList& g) {
           return TensorList{native::embedding_backward(g[0], input, num, padding_idx, dt, dev)};
         });
  return out;
}

Tensor layer_norm(const Tensor& input, int64_t M, int64_t N, const Tensor& weight, const Tensor& bias, double eps) {
  native::LayerNormForward f = native::layer_norm_forward(input, M, N, weight, bias, eps);
  if (any_requires_grad({&input, &weight, &bias})) {
    SavedVariable sx(native::contiguous(input)), sw(weight);
    record("NativeLayerNormBackward0", {&input, &weight, &bias}, {&f.y},
           [sx, sw, mean = f.mean, rstd = f.rstd, M, N](FunctionNode& n, TensorList& g) {
             Tensor xv = sx.unpack("NativeLayerNormBackward0");
             Tensor wv = sw.defined() ? sw.unpack("NativeLayerNormBackward0") : Tensor();
             std::vector<bool> needs{n.needs_input_grad(0), n.needs_input_grad(1), n.needs_input_grad(2)};
             std::vector<Tensor> r = native::layer_norm_backward(g[0], xv, wv, mean, rstd, M, N, needs);
             return TensorList(r.begin(), r.end());
           });
  }
  return f.y;
}

void RowMap::compute_inverse(int64_t num_src_rows, const char* op) {
  ember::detail::translate_bad_alloc(op, ember::detail::host_bytes(static_cast<uint64_t>(num_src_rows), sizeof(int64_t)),
                                     [&] { inverse.assign(static_cast<size_t>(num_src_rows), -1); });
  for (size_t i = 0; i < index.size(); ++i) {
    int64_t r = index[i];
    if (r < 0) continue;
    EMBER_INTERNAL_ASSERT(r < num_src_rows && inverse[static_cast<size_t>(r)] == -1, "RowMap: row ", r,
                          " is out of range or taken twice");
    inverse[static_cast<size_t>(r)] = static_cast<int64_t>(i);
  }
}

Tensor gather_rows(const Tensor& src, const std::shared_ptr<const RowMap>& map, const IntList& out_sizes, double fill) {
  const int64_t num_src_rows = static_cast<int64_t>(map->inverse.size());
  Tensor out = native::gather_rows(src, map->index, num_src_rows, out_sizes, fill);
  record("GatherRowsBackward0", {&src}, {&out}, [map, src_sizes = src.sizes()](FunctionNode&, TensorList& g) {
    if (!g[0].defined()) return TensorList{Tensor()};
    return TensorList{native::gather_rows(g[0], map->inverse, static_cast<int64_t>(map->index.size()), src_sizes, 0.0)};
  });
  return out;
}

}  // namespace ember::autograd::functions
