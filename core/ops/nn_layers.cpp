// embedding_forward/_backward, layer_norm_forward/_backward and gather_rows (core/ops/nn_native.h):
// checks, allocation, dispatch on device. CPU kernels: core/kernels/cpu/{embedding,layer_norm,
// gather_rows}.cpp; CUDA: the functors of core/kernels/{embedding,layer_norm,gather_rows}.h run by
// core/kernels/cuda/nn_layers.cu.
#include <vector>

#include "core/kernels/cpu/embedding.h"
#include "core/kernels/cpu/gather_rows.h"
#include "core/kernels/cpu/layer_norm.h"
#include "core/ops/detail/plan.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::native {
namespace {

bool cpu_float(const Tensor& t) { return t.device().is_cpu() && (t.dtype() == kFloat32 || t.dtype() == kFloat64); }
bool cuda_float(const Tensor& t) { return t.device().is_cuda() && (t.dtype() == kFloat32 || t.dtype() == kFloat64); }

// int64 indices, contiguous, every value in [0, num). On CUDA a check kernel finds the first bad
// index before anything trusts them; only that one value is copied to the host for the message.
Tensor checked_indices(const Tensor& indices, int64_t num) {
  EMBER_CHECK_T(TypeError, indices.dtype() == kInt64 || indices.dtype() == kInt32,
                "embedding: Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                "Long, Int; but got ", indices.dtype(), " instead");
  Tensor idx = contiguous(indices.dtype() == kInt64 ? indices : to(indices, kInt64));
  if (idx.numel() == 0) return idx;
  if (idx.device().is_cpu()) {
    const int64_t* p = idx.data_ptr<int64_t>();
    for (int64_t i = 0; i < idx.numel(); ++i) {
      EMBER_CHECK_T(IndexError, p[i] >= 0 && p[i] < num, "embedding: index out of range in self (index ", p[i],
                    ", num_embeddings ", num, ")");
    }
  } else {
    Tensor slot = empty({1}, TensorOptions(kInt64).device(idx.device()));
    const int64_t bad = detail::require_cuda("embedding").index_first_out_of_range(
        idx.data_ptr<int64_t>(), idx.numel(), num, /*allow_negative=*/false, slot.raw_data(), idx.device().index);
    if (bad >= 0) {
      const auto value = static_cast<int64_t>(select(reshape(idx, {-1}), 0, bad).item());
      EMBER_THROW(IndexError, "embedding: index out of range in self (index ", value, ", num_embeddings ", num, ")");
    }
  }
  return idx;
}

}  // namespace

Tensor embedding_forward(const Tensor& weight, const Tensor& indices) {
  EMBER_CHECK_T(ValueError, weight.dim() == 2, "embedding: 'weight' must be 2-D, got shape ", weight.sizes());
  const int64_t num = weight.size(0), dim = weight.size(1);
  if (weight.device().is_cuda()) {
    EMBER_CHECK(indices.device() == weight.device(), "embedding: expected the indices on the weight's device ",
                weight.device(), ", got ", indices.device());
  }
  Tensor idx = checked_indices(indices, num);
  IntList out_sizes = indices.sizes();
  out_sizes.push_back(dim);
  if (weight.device().is_cuda()) {
    Tensor w = contiguous(weight);
    Tensor out = empty(out_sizes, TensorOptions(weight.dtype()).device(weight.device()));
    if (out.numel() > 0) {
      detail::require_cuda("embedding").embedding_forward(weight.dtype(), idx.data_ptr<int64_t>(), idx.numel(), dim,
                                                          w.raw_data(), out.raw_data(), weight.device().index);
    }
    return out;
  }
  if (!(cpu_float(weight) && idx.device().is_cpu())) {
    return reshape(index_select(weight, 0, reshape(idx, {-1})), out_sizes);
  }
  Tensor w = contiguous(weight);
  Tensor out = empty(out_sizes, TensorOptions(weight.dtype()).device(weight.device()));
  kernels::cpu::embedding_forward(weight.dtype(), w.raw_data(), idx.data_ptr<int64_t>(), idx.numel(), dim,
                                  out.raw_data());
  return out;
}

Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights, int64_t padding_idx,
                          DType dtype, Device device) {
  Tensor idx = checked_indices(indices, num_weights);
  const int64_t dim = idx.numel() > 0 ? grad.numel() / idx.numel() : (grad.dim() > 0 ? grad.sizes().back() : 0);
  Tensor g = contiguous(grad.dtype() == dtype ? grad : to(grad, dtype));
  Tensor gw = zeros({num_weights, dim}, TensorOptions(dtype).device(device));
  if (cpu_float(gw) && idx.device().is_cpu() && g.device() == device) {
    kernels::cpu::embedding_backward(dtype, g.raw_data(), idx.data_ptr<int64_t>(), idx.numel(), dim, padding_idx,
                                     gw.raw_data());
    return gw;
  }
  if (cuda_float(gw) && idx.device() == device && g.device() == device) {
    // Deterministic: sort, then one sum per index (Note [Deterministic embedding backward]).
    auto& k = detail::require_cuda("embedding_backward");
    const int64_t n = idx.numel();
    const size_t bytes = k.embedding_backward_scratch_bytes(n, num_weights, device.index);
    Tensor scratch = empty({static_cast<int64_t>((bytes + 7) / 8)}, TensorOptions(kInt64).device(device));
    k.embedding_backward(dtype, idx.data_ptr<int64_t>(), n, num_weights, dim, padding_idx, g.raw_data(),
                         gw.raw_data(), scratch.raw_data(), bytes, device.index);
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
  if (input.device().is_cuda()) {
    if (M > 0) {
      detail::require_cuda("layer_norm").layer_norm_forward(dt, x.raw_data(), wp, bp, f.y.raw_data(),
                                                            f.mean.data_ptr<double>(), f.rstd.data_ptr<double>(), M, N,
                                                            eps, input.device().index);
    }
    return f;
  }
  kernels::cpu::layer_norm_forward(dt, x.raw_data(), wp, bp, f.y.raw_data(), f.mean.data_ptr<double>(),
                                   f.rstd.data_ptr<double>(), M, N, eps);
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
  if (input.device().is_cuda()) {
    if (N > 0) {  // M == 0: no rows, and the column functor writes zero gradients
      detail::require_cuda("layer_norm_backward").layer_norm_backward(
          dt, g.raw_data(), x.raw_data(), raw(w), mc.data_ptr<double>(), rc.data_ptr<double>(), M, N, raw(r[0]),
          raw(r[1]), raw(r[2]), input.device().index);
    }
    return r;
  }
  kernels::cpu::layer_norm_backward(dt, g.raw_data(), x.raw_data(), raw(w), mc.data_ptr<double>(),
                                    rc.data_ptr<double>(), M, N, raw(r[0]), raw(r[1]), raw(r[2]));
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
  if (src.device().is_cuda()) {
    // The row map is host metadata: one copy to the device, then one launch.
    Tensor idx = from_vector<int64_t>(index, {out_rows}, src.device());
    Tensor fill_value = full({1}, fill, TensorOptions(src.dtype()).device(src.device()));
    detail::require_cuda("gather_rows").gather_rows(src.dtype(), idx.data_ptr<int64_t>(), out_rows, cols,
                                                    sc.raw_data(), fill_value.raw_data(), out.raw_data(),
                                                    src.device().index);
    return out;
  }
  Tensor fill_row;
  if (fill != 0.0) fill_row = full({cols}, fill, TensorOptions(src.dtype()));
  kernels::cpu::gather_rows(sc.raw_data(), index.data(), out_rows, static_cast<size_t>(cols) * src.element_size(),
                            fill_row.defined() ? fill_row.raw_data() : nullptr, out.raw_data());
  return out;
}

}  // namespace ember::native
