#include "core/kernels/cpu/reduce.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/thread_pool.h"

namespace ember::kernels::cpu {
namespace {

template <typename T, typename Acc, typename Out>
void reduce_plan(const ReducePlan& p, const T* in, Out* out, int64_t* out_idx, ReduceKind op, double scale) {
  Reducer<T, Acc> r{op};
  const bool arg = op == ReduceKind::kMax || op == ReduceKind::kMin || op == ReduceKind::kArgMax || op == ReduceKind::kArgMin;
  const int64_t inner = p.red_ndim ? p.red_sizes[p.red_ndim - 1] : 1;
  const int64_t inner_stride = p.red_ndim ? p.red_strides[p.red_ndim - 1] : 0;
  const int64_t outer_red = p.red_numel / std::max<int64_t>(inner, 1);
  ReducePlan outer_plan = p;  // reduced dims without the innermost
  if (outer_plan.red_ndim) outer_plan.red_ndim--;
  auto body = [&](int64_t ob, int64_t oe) {
    for (int64_t o = ob; o < oe; ++o) {
      const T* base = in + p.out_offset(o);
      AccIdx<Acc> acc = r.init();
      if (p.red_numel > 0) {
        for (int64_t ro = 0; ro < outer_red; ++ro) {
          const T* row = base + outer_plan.red_offset(ro);
          int64_t idx0 = ro * inner;
          if (op == ReduceKind::kSum && inner_stride == 1) {
            Acc s = 0;
            for (int64_t i = 0; i < inner; ++i) s += static_cast<Acc>(row[i]);
            acc.v += s;
          } else {
            for (int64_t i = 0; i < inner; ++i) r.step(acc, row[i * inner_stride], idx0 + i);
          }
        }
      }
      if (out) out[o] = static_cast<Out>(static_cast<double>(acc.v) * scale);
      if (arg && out_idx) out_idx[o] = acc.i < 0 ? 0 : acc.i;
    }
  };
  int64_t work = p.out_numel * std::max<int64_t>(p.red_numel, 1);
  if (work < 65536 || p.out_numel == 1) {
    body(0, p.out_numel);
  } else {
    parallel_for(0, p.out_numel, std::max<int64_t>(1, 32768 / std::max<int64_t>(p.red_numel, 1)), body);
  }
}

// Sum over the leading dims of a contiguous input (plan.leading_dense): rows accumulated into the
// output columns in double (vectorizes).
template <typename T>
void sum_leading(const ReducePlan& p, const T* in, T* o, double scale) {
  const int64_t rows = p.red_numel, cols = p.out_numel;
  auto cols_body = [&](int64_t cb, int64_t ce) {
    std::vector<double> acc(static_cast<size_t>(ce - cb), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = in + r * cols;
      for (int64_t c = cb; c < ce; ++c) acc[c - cb] += row[c];
    }
    for (int64_t c = cb; c < ce; ++c) o[c] = static_cast<T>(acc[c - cb] * scale);
  };
  if (rows * cols < 65536) {
    cols_body(0, cols);
  } else {
    parallel_for(0, cols, std::max<int64_t>(16, 65536 / std::max<int64_t>(rows, 1)), cols_body);
  }
}

}  // namespace

void reduce_kernel(ReduceKind op, DType in_dtype, DType out_dtype, const ReducePlan& plan, const void* in, void* out,
                   int64_t* out_idx, double scale, int /*device_index*/, const char* name) {
  if (op == ReduceKind::kSum && out != nullptr && out_dtype == in_dtype && plan.leading_dense) {
    if (in_dtype == kFloat32) return sum_leading(plan, static_cast<const float*>(in), static_cast<float*>(out), scale);
    if (in_dtype == kFloat64) return sum_leading(plan, static_cast<const double*>(in), static_cast<double*>(out), scale);
  }
  EMBER_DISPATCH_ALL(in_dtype, name, [&] {
    using T = scalar_t;
    if constexpr (sizeof(T) == 2) {
      EMBER_THROW(TypeError, name, ": 16-bit floats are not supported by CPU reductions; convert to float32 first");
    } else {
      using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
      EMBER_DISPATCH_ALL(out_dtype, name, [&] {
        if constexpr (sizeof(scalar_t) == 2) {
          EMBER_THROW(TypeError, name, ": 16-bit output dtype is not supported on CPU");
        } else {
          reduce_plan<T, Acc, scalar_t>(plan, static_cast<const T*>(in), static_cast<scalar_t*>(out), out_idx, op,
                                        scale);
        }
      });
    }
  });
}

}  // namespace ember::kernels::cpu
