// Reductions over dims with keepdim: sum, mean, prod, amax/amin, max/min with indices,
// argmax/argmin, var, all/any, and sum_to_size for broadcast gradients. Plans here, kernels
// through reduce_stub (core/ops/reduce_stubs.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/ops/reduce_stubs.h"

#include "core/ops/detail/plan.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"

namespace ember::native {

detail::DispatchStub<ReduceFn> reduce_stub;

namespace {
using kernels::ReduceKind;
using kernels::ReducePlan;

struct ReduceSetup {
  ReducePlan plan;
  IntList out_sizes;       // with keepdim applied
  std::vector<bool> reduced;
};

ReduceSetup setup_reduce(const Tensor& a, const IntList& dims, bool keepdim, const char* op) {
  ReduceSetup s;
  int64_t nd = a.dim();
  s.reduced.assign(std::max<int64_t>(nd, 0), dims.empty());
  for (auto d : dims) {
    int64_t w = wrap_dim(d, nd, op);
    if (nd == 0) continue;
    EMBER_CHECK_T(ValueError, !s.reduced[w], op, ": dim ", d, " appears multiple times in the list of dims ", dims);
    s.reduced[w] = true;
  }
  EMBER_CHECK(nd <= kernels::kMaxDims, op, ": at most ", kernels::kMaxDims, " dimensions are supported");
  for (int64_t d = 0; d < nd; ++d) {
    if (s.reduced[d]) {
      if (keepdim) s.out_sizes.push_back(1);
      s.plan.red_sizes[s.plan.red_ndim] = a.sizes()[d];
      s.plan.red_strides[s.plan.red_ndim] = a.strides()[d];
      s.plan.red_ndim++;
      s.plan.red_numel *= a.sizes()[d];
    } else {
      s.out_sizes.push_back(a.sizes()[d]);
      s.plan.out_sizes[s.plan.out_ndim] = a.sizes()[d];
      s.plan.out_in_strides[s.plan.out_ndim] = a.strides()[d];
      s.plan.out_ndim++;
      s.plan.out_numel *= a.sizes()[d];
    }
  }
  int64_t lead = 0;
  while (lead < nd && s.reduced[lead]) ++lead;
  s.plan.leading_dense = lead > 0 && s.plan.out_numel > 1 && a.is_contiguous() &&
                         std::find(s.reduced.begin() + lead, s.reduced.end(), true) == s.reduced.end();
  // Sort reduced dims so the smallest stride is innermost (cache-friendly inner loop).
  for (int i = 0; i < s.plan.red_ndim; ++i) {
    for (int j = i + 1; j < s.plan.red_ndim; ++j) {
      if (s.plan.red_strides[j] > s.plan.red_strides[i]) {
        std::swap(s.plan.red_strides[i], s.plan.red_strides[j]);
        std::swap(s.plan.red_sizes[i], s.plan.red_sizes[j]);
      }
    }
  }
  return s;
}

Tensor reduce_values(const Tensor& a, const IntList& dims, bool keepdim, ReduceKind op, DType out_dtype, double scale,
                     const char* name) {
  ReduceSetup s = setup_reduce(a, dims, keepdim, name);
  if ((op == ReduceKind::kMax || op == ReduceKind::kMin) && s.plan.red_numel == 0) {
    EMBER_THROW(IndexError, name, ": Expected reduction dim to have non-zero size (input shape ", a.sizes(), ")");
  }
  auto is16 = [](DType t) { return t == kBFloat16 || t == kFloat16; };
  if (a.device().is_cpu() && (is16(a.dtype()) || is16(out_dtype))) {
    // Widen, reduce in float32 (double accumulation), round once: Note [16-bit floats on CPU]
    // (core/ops/elementwise.cpp).
    Tensor r = reduce_values(is16(a.dtype()) ? to(a, kFloat32) : a, dims, keepdim, op,
                             is16(out_dtype) ? kFloat32 : out_dtype, scale, name);
    return to(r, out_dtype);
  }
  Tensor out = empty(s.out_sizes, TensorOptions(out_dtype).device(a.device()));
  reduce_stub.kernel(a.device(), name)(op, a.dtype(), out_dtype, s.plan, a.raw_data(), out.raw_data(), nullptr, scale,
                                       a.device().index, name);
  return out;
}

std::pair<Tensor, Tensor> reduce_with_index(const Tensor& a, int64_t dim, bool keepdim, ReduceKind op, bool want_values,
                                            const char* name) {
  ReduceSetup s = setup_reduce(a, {dim}, keepdim, name);
  EMBER_CHECK_T(IndexError, s.plan.red_numel > 0, name, ": Expected reduction dim ", dim,
                " to have non-zero size (input shape ", a.sizes(), ")");
  if (a.device().is_cpu() && (a.dtype() == kBFloat16 || a.dtype() == kFloat16)) {
    // Values are exact in float32; See Note [16-bit floats on CPU] (core/ops/elementwise.cpp).
    auto [v, i] = reduce_with_index(to(a, kFloat32), dim, keepdim, op, want_values, name);
    return {want_values ? to(v, a.dtype()) : v, i};
  }
  Tensor idx = empty(s.out_sizes, TensorOptions(kInt64).device(a.device()));
  Tensor vals = want_values ? empty(s.out_sizes, TensorOptions(a.dtype()).device(a.device())) : Tensor();
  reduce_stub.kernel(a.device(), name)(op, a.dtype(), a.dtype(), s.plan, a.raw_data(),
                                       want_values ? vals.raw_data() : nullptr, idx.data_ptr<int64_t>(), 1.0,
                                       a.device().index, name);
  return {vals, idx};
}

int64_t reduced_count(const Tensor& a, const IntList& dims) {
  if (dims.empty()) return a.numel();
  int64_t n = 1;
  for (auto d : dims) n *= a.dim() == 0 ? 1 : a.sizes()[wrap_dim(d, a.dim(), "mean")];
  return n;
}

}  // namespace

Tensor sum(const Tensor& a, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  DType out = dtype ? *dtype : (is_integral(a.dtype(), true) ? kInt64 : a.dtype());
  return reduce_values(a, dims, keepdim, ReduceKind::kSum, out, 1.0, "sum");
}

Tensor mean(const Tensor& a, const IntList& dims, bool keepdim) {
  EMBER_CHECK_T(TypeError, a.is_floating_point(), "mean(): could not infer output dtype. Input dtype must be either a "
                "floating point or complex dtype. Got: ", a.dtype());
  int64_t n = reduced_count(a, dims);
  return reduce_values(a, dims, keepdim, ReduceKind::kSum, a.dtype(), n ? 1.0 / static_cast<double>(n) : NAN, "mean");
}

Tensor prod(const Tensor& a, const IntList& dims, bool keepdim) {
  DType out = is_integral(a.dtype(), true) ? kInt64 : a.dtype();
  return reduce_values(a, dims, keepdim, ReduceKind::kProd, out, 1.0, "prod");
}
Tensor amax(const Tensor& a, const IntList& dims, bool keepdim) {
  return reduce_values(a, dims, keepdim, ReduceKind::kMax, a.dtype(), 1.0, "amax");
}
Tensor amin(const Tensor& a, const IntList& dims, bool keepdim) {
  return reduce_values(a, dims, keepdim, ReduceKind::kMin, a.dtype(), 1.0, "amin");
}
Tensor all(const Tensor& a) { return reduce_values(a, {}, false, ReduceKind::kAll, kBool, 1.0, "all"); }
Tensor any(const Tensor& a) { return reduce_values(a, {}, false, ReduceKind::kAny, kBool, 1.0, "any"); }

std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim) {
  return reduce_with_index(a, dim, keepdim, ReduceKind::kMax, true, "max");
}
std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim) {
  return reduce_with_index(a, dim, keepdim, ReduceKind::kMin, true, "min");
}
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim) {
  return reduce_with_index(a, dim, keepdim, ReduceKind::kArgMax, false, "argmax").second;
}
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim) {
  return reduce_with_index(a, dim, keepdim, ReduceKind::kArgMin, false, "argmin").second;
}

Tensor var(const Tensor& a, const IntList& dims, int64_t correction, bool keepdim) {
  EMBER_CHECK_T(TypeError, a.is_floating_point(), "var: expected a floating-point tensor, got ", a.dtype());
  Tensor m = mean(a, dims, true);
  Tensor d = sub(a, m);
  Tensor sq = mul(d, d);
  int64_t n = reduced_count(a, dims);
  double denom = static_cast<double>(std::max<int64_t>(n - correction, 0));
  return div(sum(sq, dims, keepdim), denom);
}

Tensor sum_to_size(const Tensor& a, const IntList& sizes) {
  if (a.sizes() == sizes) return a;
  int64_t lead = a.dim() - static_cast<int64_t>(sizes.size());
  EMBER_CHECK_T(ValueError, lead >= 0, "sum_to_size: size ", sizes, " is not expandable to size ", a.sizes());
  IntList dims;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
    } else {
      int64_t want = sizes[d - lead];
      EMBER_CHECK_T(ValueError, want == a.sizes()[d] || want == 1, "sum_to_size: size ", sizes,
                    " is not expandable to size ", a.sizes());
      if (want == 1 && a.sizes()[d] != 1) dims.push_back(d);
    }
  }
  Tensor r = dims.empty() ? a : sum(a, dims, true);
  if (lead > 0 || r.sizes() != sizes) r = reshape(r, sizes);
  return r;
}

}  // namespace ember::native
