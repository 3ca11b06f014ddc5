// embedding_forward/_backward, layer_norm_forward/_backward and gather_rows (core/ops/nn_native.h):
// checks, allocation and the stubs of core/ops/nn_layers_stubs.h.
#include "core/ops/nn_layers_stubs.h"

#include <vector>

#include "core/ops/detail/plan.h"
#include "core/ops/factory.h"
#include "core/ops/index_stubs.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::native {

detail::DispatchStub<GatherRowsFn> gather_rows_stub;
detail::DispatchStub<EmbeddingForwardFn> embedding_forward_stub;
detail::DispatchStub<EmbeddingBackwardScratchBytesFn> embedding_backward_scratch_bytes_stub;
detail::DispatchStub<EmbeddingBackwardFn> embedding_backward_stub;
detail::DispatchStub<LayerNormForwardFn> layer_norm_forward_stub;
detail::DispatchStub<LayerNormBackwardFn> layer_norm_backward_stub;

namespace {

bool is_float(const Tensor& t) { return t.dtype() == kFloat32 || t.dtype() == kFloat64; }

// int64 indices, contiguous, every value in [0, num): a check kernel finds the first bad index
// before anything trusts them; only that one value is read for the message.
Tensor checked_indices(const Tensor& indices, int64_t num) {
  EMBER_CHECK_T(TypeError, indices.dtype() == kInt64 || indices.dtype() == kInt32,
                "embedding: Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                "Long, Int; but got ", indices.dtype(), " instead");
  Tensor idx = contiguous(indices.dtype() == kInt64 ? indices : to(indices, kInt64));
  if (idx.numel() == 0) return idx;
  Tensor slot = empty({1}, TensorOptions(kInt64).device(idx.device()));
  const int64_t bad = index_first_out_of_range_stub.kernel(idx.device(), "embedding")(
      idx.data_ptr<int64_t>(), idx.numel(), num, /*allow_negative=*/false, slot.raw_data(), idx.device().index);
  if (bad >= 0) {
    const auto value = select(reshape(idx, {-1}), 0, bad).item<int64_t>();
    EMBER_THROW(IndexError, "embedding: index out of range in self (index ", value, ", num_embeddings ", num, ")");
  }
  return idx;
}

}  // namespace

Tensor embedding_forward(const Tensor& weight, const Tensor& indices) {
  EMBER_CHECK_T(ValueError, weight.dim() == 2, "embedding: 'weight' must be 2-D, got shape ", weight.sizes());
  const int64_t num = weight.size(0), dim = weight.size(1);
  EMBER_CHECK(indices.device() == weight.device(), "embedding: expected the indices on the weight's device ",
              weight.device(), ", got ", indices.device());
  Tensor idx = checked_indices(indices, num);
  IntList out_sizes = indices.sizes();
  out_sizes.push_back(dim);
  Tensor w = contiguous(weight);
  Tensor out = empty(out_sizes, TensorOptions(weight.dtype()).device(weight.device()));
  if (out.numel() > 0) {
    embedding_forward_stub.kernel(weight.device(), "embedding")(weight.dtype(), idx.data_ptr<int64_t>(), idx.numel(),
                                                                dim, w.raw_data(), out.raw_data(),
                                                                weight.device().index);
  }
  return out;
}

Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights, int64_t padding_idx,
                          DType dtype, Device device) {
  Tensor idx = checked_indices(indices, num_weights);
  const int64_t dim = idx.numel() > 0 ? grad.numel() / idx.numel() : (grad.dim() > 0 ? grad.sizes().back() : 0);
  Tensor g = contiguous(grad.dtype() == dtype ? grad : to(grad, dtype));
  Tensor gw = zeros({num_weights, dim}, TensorOptions(dtype).device(device));
  if (is_float(gw) && idx.device() == device && g.device() == device) {
    // Deterministic: one sum per index in position order (Note [Deterministic embedding backward]).
    const int64_t n = idx.numel();
    const size_t bytes = embedding_backward_scratch_bytes_stub.kernel(device, "embedding_backward")(n, num_weights,
                                                                                                   device.index);
    Tensor scratch;
    if (bytes > 0) scratch = empty({static_cast<int64_t>((bytes + 7) / 8)}, TensorOptions(kInt64).device(device));
    embedding_backward_stub.kernel(device, "embedding_backward")(
        dtype, idx.data_ptr<int64_t>(), n, num_weights, dim, padding_idx, g.raw_data(), gw.raw_data(),
        scratch.defined() ? scratch.raw_data() : nullptr, bytes, device.index);
    return gw;
  }
  index_add_(gw, 0, reshape(idx, {-1}), reshape(g, {-1, dim}));
  if (padding_idx >= 0) {
    Tensor row = select(gw, 0, padding_idx);
    zero_(row);
  }
  return gw;
}

LayerNormForward layer_norm_forward(const Tensor& input, int64_t M, int64_t N, const Tensor& weight,
                                    const Tensor& bias, double eps) {
  const DType dt = input.dtype();
  EMBER_CHECK_T(TypeError, dt == kFloat32 || dt == kFloat64, "layer_norm: expected a float32 or float64 input, got ",
                dt);
  for (const Tensor* t : {&weight, &bias}) {
    EMBER_CHECK_T(TypeError, !t->defined() || (t->dtype() == dt && t->device() == input.device()),
                  "layer_norm: expected weight and bias of the input's dtype ", dt, " on ", input.device(), ", got ",
                  t->dtype(), " on ", t->device());
  }
  EMBER_INTERNAL_ASSERT(M * N == input.numel(), "layer_norm: ", M, " x ", N, " rows for ", input.sizes());
  LayerNormForward f;
  Tensor x = contiguous(input);
  Tensor w = weight.defined() ? contiguous(weight) : Tensor();
  Tensor b = bias.defined() ? contiguous(bias) : Tensor();
  f.y = empty(input.sizes(), TensorOptions(dt).device(input.device()));
  f.mean = empty({M}, TensorOptions(kFloat64).device(input.device()));
  f.rstd = empty({M}, TensorOptions(kFloat64).device(input.device()));
  const void* wp = w.defined() ? w.raw_data() : nullptr;
  const void* bp = b.defined() ? b.raw_data() : nullptr;
  if (M > 0) {
    layer_norm_forward_stub.kernel(input.device(), "layer_norm")(dt, x.raw_data(), wp, bp, f.y.raw_data(),
                                                                 f.mean.data_ptr<double>(), f.rstd.data_ptr<double>(),
                                                                 M, N, eps, input.device().index);
  }
  return f;
}

std::vector<Tensor> layer_norm_backward(const Tensor& grad, const Tensor& input, const Tensor& weight,
                                        const Tensor& mean, const Tensor& rstd, int64_t M, int64_t N,
                                        const std::vector<bool>& needs) {
  const DType dt = input.dtype();
  EMBER_INTERNAL_ASSERT(needs.size() == 3 && mean.numel() == M && rstd.numel() == M, "layer_norm_backward: ", M,
                        " rows");
  Tensor x = contiguous(input);
  Tensor w = weight.defined() ? contiguous(weight) : Tensor();
  Tensor g = contiguous(grad.dtype() == dt ? grad : to(grad, dt));
  const TensorOptions opts = TensorOptions(dt).device(input.device());
  const IntList wsizes = weight.defined() ? weight.sizes() : IntList{N};
  std::vector<Tensor> r(3);
  if (needs[0]) r[0] = empty(input.sizes(), opts);
  if (needs[1]) r[1] = empty(wsizes, opts);
  if (needs[2]) r[2] = empty(wsizes, opts);
  auto raw = [](const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; };
  Tensor mc = contiguous(mean), rc = contiguous(rstd);
  if (N > 0) {  // M == 0: no rows, and the kernels write zero weight and bias gradients
    layer_norm_backward_stub.kernel(input.device(), "layer_norm_backward")(
        dt, g.raw_data(), x.raw_data(), raw(w), mc.data_ptr<double>(), rc.data_ptr<double>(), M, N, raw(r[0]),
        raw(r[1]), raw(r[2]), input.device().index);
  }
  return r;
}

Tensor gather_rows(const Tensor& src, const std::vector<int64_t>& index, int64_t num_src_rows,
                   const IntList& out_sizes, double fill) {
  Tensor sc = contiguous(src);
  EMBER_INTERNAL_ASSERT(num_src_rows > 0 ? sc.numel() % num_src_rows == 0 : sc.numel() == 0,
                        "gather_rows: source of ", sc.numel(), " elements is not ", num_src_rows, " rows");
  const int64_t cols = num_src_rows > 0 ? sc.numel() / num_src_rows : 0;
  const int64_t out_rows = static_cast<int64_t>(index.size());
  EMBER_INTERNAL_ASSERT(numel_of(out_sizes) == out_rows * cols, "gather_rows: output shape ", out_sizes,
                        " does not hold ", out_rows, " rows of ", cols);
  for (int64_t r : index) {
    EMBER_INTERNAL_ASSERT(r >= -1 && r < num_src_rows, "gather_rows: row ", r, " of ", num_src_rows);
  }
  Tensor out = empty(out_sizes, TensorOptions(src.dtype()).device(src.device()));
  if (out.numel() == 0) return out;
  // The row map is host metadata: one copy to the device, then one call.
  Tensor idx = from_vector<int64_t>(index, {out_rows}, src.device());
  Tensor fill_value = full({1}, fill, TensorOptions(src.dtype()).device(src.device()));
  gather_rows_stub.kernel(src.device(), "gather_rows")(src.dtype(), idx.data_ptr<int64_t>(), out_rows, cols,
                                                       sc.raw_data(), fill_value.raw_data(), out.raw_data(),
                                                       src.device().index);
  return out;
}

}  // namespace ember::native
