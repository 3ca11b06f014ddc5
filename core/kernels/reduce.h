// Reductions, once: a ReducePlan splits the input into kept (output) and reduced dimensions;
// reducer functors say how to combine. Host/device: the CPU driver (core/ops/reduce.cpp) and
// the CUDA driver both walk the same plan.
#pragma once
#include <cstdint>

#include "core/kernels/loops.h"
#include "core/macros.h"

namespace ember::kernels {

struct ReducePlan {
  int out_ndim = 0;
  int64_t out_sizes[kMaxDims] = {};
  int64_t out_in_strides[kMaxDims] = {};  // input strides (elements) of the kept dims
  int red_ndim = 0;
  int64_t red_sizes[kMaxDims] = {};
  int64_t red_strides[kMaxDims] = {};  // input strides (elements) of the reduced dims; last is innermost
  int64_t out_numel = 1;
  int64_t red_numel = 1;
  // The input is contiguous and the reduced dims are its leading dims (at least one), with more
  // than one output: a [red_numel, out_numel] matrix summed over rows. A CPU fast path reads it.
  bool leading_dense = false;

  EMBER_HOST_DEVICE int64_t out_offset(int64_t o) const {
    int64_t off = 0;
    for (int d = out_ndim - 1; d >= 0; --d) {
      off += (o % out_sizes[d]) * out_in_strides[d];
      o /= out_sizes[d];
    }
    return off;
  }
  EMBER_HOST_DEVICE int64_t red_offset(int64_t r) const {
    int64_t off = 0;
    for (int d = red_ndim - 1; d >= 0; --d) {
      off += (r % red_sizes[d]) * red_strides[d];
      r /= red_sizes[d];
    }
    return off;
  }
};

enum class ReduceOp : int8_t { Sum, Prod, Max, Min, ArgMax, ArgMin, All, Any };

/// Accumulator of a reduction: value plus the index where it was found (arg reductions).
template <typename Acc>
struct AccIdx {
  Acc v;
  int64_t i;
};

template <typename T, typename Acc>
struct Reducer {
  ReduceOp op;
  EMBER_HOST_DEVICE AccIdx<Acc> init() const {
    switch (op) {
      case ReduceOp::Prod: case ReduceOp::All: return {Acc(1), 0};
      case ReduceOp::Sum: case ReduceOp::Any: return {Acc(0), 0};
      default: return {Acc(0), -1};
    }
  }
  EMBER_HOST_DEVICE void step(AccIdx<Acc>& a, T x, int64_t idx) const {
    Acc v = static_cast<Acc>(x);
    switch (op) {
      case ReduceOp::Sum: a.v += v; break;
      case ReduceOp::Prod: a.v *= v; break;
      case ReduceOp::All: a.v = (a.v != Acc(0) && v != Acc(0)) ? Acc(1) : Acc(0); break;
      case ReduceOp::Any: a.v = (a.v != Acc(0) || v != Acc(0)) ? Acc(1) : Acc(0); break;
      case ReduceOp::Max: case ReduceOp::ArgMax:
        // NaN propagates, first occurrence wins ties.
        if (a.i < 0 || (v != v && a.v == a.v) || (a.v == a.v && v > a.v)) { a.v = v; a.i = idx; }
        break;
      case ReduceOp::Min: case ReduceOp::ArgMin:
        if (a.i < 0 || (v != v && a.v == a.v) || (a.v == a.v && v < a.v)) { a.v = v; a.i = idx; }
        break;
    }
  }
};

}  // namespace ember::kernels
