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

  /// Input offsets (elements) of output o and of reduction index r within an output's run.
  EMBER_HOST_DEVICE int64_t out_offset(int64_t o) const { return offset_of(o, out_ndim, out_sizes, out_in_strides); }
  EMBER_HOST_DEVICE int64_t red_offset(int64_t r) const { return offset_of(r, red_ndim, red_sizes, red_strides); }

 private:
  // Linear index i over `ndim` dims of `sizes` (last innermost) to an offset under `strides`.
  EMBER_HOST_DEVICE static int64_t offset_of(int64_t i, int ndim, const int64_t* sizes, const int64_t* strides) {
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      off += (i % sizes[d]) * strides[d];
      i /= sizes[d];
    }
    return off;
  }
};

enum class ReduceKind : int8_t { kSum, kProd, kMax, kMin, kArgMax, kArgMin, kAll, kAny };

/// Accumulator of a reduction: value plus the index where it was found (arg reductions).
template <typename Acc>
struct AccIdx {
  Acc v;
  int64_t i;
};

template <typename T, typename Acc>
struct Reducer {
  ReduceKind op;
  EMBER_HOST_DEVICE AccIdx<Acc> init() const {
    switch (op) {
      case ReduceKind::kProd: case ReduceKind::kAll: return {Acc(1), 0};
      case ReduceKind::kSum: case ReduceKind::kAny: return {Acc(0), 0};
      default: return {Acc(0), -1};
    }
  }
  EMBER_HOST_DEVICE void step(AccIdx<Acc>& a, T x, int64_t idx) const {
    Acc v = static_cast<Acc>(x);
    switch (op) {
      case ReduceKind::kSum: a.v += v; break;
      case ReduceKind::kProd: a.v *= v; break;
      case ReduceKind::kAll: a.v = (a.v != Acc(0) && v != Acc(0)) ? Acc(1) : Acc(0); break;
      case ReduceKind::kAny: a.v = (a.v != Acc(0) || v != Acc(0)) ? Acc(1) : Acc(0); break;
      case ReduceKind::kMax: case ReduceKind::kArgMax:
        // NaN propagates, first occurrence wins ties.
        if (a.i < 0 || (v != v && a.v == a.v) || (a.v == a.v && v > a.v)) { a.v = v; a.i = idx; }
        break;
      case ReduceKind::kMin: case ReduceKind::kArgMin:
        if (a.i < 0 || (v != v && a.v == a.v) || (a.v == a.v && v < a.v)) { a.v = v; a.i = idx; }
        break;
    }
  }
};

}  // namespace ember::kernels
