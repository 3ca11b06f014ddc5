// The bodies of the indexing ops (index_select, gather, index_add_, scatter_add_,
// one_hot) and the pre-launch checks of data-dependent values, as per-element functors for
// ElementKernel (Note [Kernels as launch-grid functors], core/kernels/launch.h). Indices reach
// them as a contiguous int64 tensor; strides are in elements. Host/device, no CUDA headers.
#pragma once
#include <cstdint>

#include "core/kernels/atomic.h"
#include "core/kernels/loops.h"
#include "core/macros.h"

namespace ember::kernels {

/// "Nothing failed" in a FirstFailureF slot.
constexpr unsigned long long kNoFailure = ~0ull;

/// Records in *first the smallest i in [0, n) for which ok(i) is false (the slot starts at
/// kNoFailure). Ops run it before a launch that trusts the values, so a bad index or
/// probability is reported as the CPU path reports it (the first one, by position).
template <typename Pred>
struct FirstFailureF {
  Pred ok;
  unsigned long long* first;
  EMBER_HOST_DEVICE void operator()(int64_t i) const {
    if (!ok(i)) atomic_min_u64(first, static_cast<unsigned long long>(i));
  }
};

/// idx[i] in [-size, size) (allow_negative) or [0, size).
struct IndexInRange {
  const int64_t* idx;
  int64_t size;
  bool allow_negative;
  EMBER_HOST_DEVICE bool operator()(int64_t i) const {
    const int64_t v = idx[i];
    return v < size && (allow_negative ? v >= -size : v >= 0);
  }
};

/// 0 <= p[i] <= 1 (false for NaN).
template <typename T>
struct ProbabilityInRange {
  const T* p;
  EMBER_HOST_DEVICE bool operator()(int64_t i) const {
    const double v = static_cast<double>(p[i]);
    return v >= 0.0 && v <= 1.0;
  }
};

/// The geometry shared by the gather- and scatter-shaped ops. Work item `lin` walks `sizes`
/// in row-major order; its coordinate c gives offsets into the plain side (strides `plain`)
/// and into the indexed side (strides `indexed`), whose coordinate along `dim` is replaced by
/// the index: idx[lin] (gather, scatter_add_) or idx[c[dim]] (index_select, index_add_).
/// A negative index counts from the end of the indexed side's `dim_size`.
struct IndexGeometry {
  int ndim = 0;
  int dim = 0;
  bool index_per_element = true;
  int64_t dim_size = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t plain[kMaxDims] = {};
  int64_t indexed[kMaxDims] = {};

  EMBER_HOST_DEVICE void offsets(int64_t lin, const int64_t* idx, int64_t* plain_off, int64_t* indexed_off) const {
    int64_t p = 0, q = 0, rem = lin, along = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t c = rem % sizes[d];
      rem /= sizes[d];
      p += c * plain[d];
      if (d == dim) {
        along = c;
      } else {
        q += c * indexed[d];
      }
    }
    int64_t v = idx[index_per_element ? lin : along];
    if (v < 0) v += dim_size;
    *plain_off = p;
    *indexed_off = q + v * indexed[dim];
  }
};

/// One element moved per work item between the plain and the indexed side of IndexGeometry:
///   kGather      out[plain] = in[indexed]    gather, index_select (out is the plain side);
///   kScatterAdd  self[indexed] += src[plain] scatter_add_, index_add_: several items may hit
///                one element of self, hence the atomic (summation order on a GPU is therefore
///                unspecified).
enum class IndexMove { kGather, kScatterAdd };

template <typename T, IndexMove kMove>
struct IndexMoveF {
  IndexGeometry g;
  const int64_t* idx;
  const T* from;  // in (kGather) or src (kScatterAdd)
  T* to;          // out (kGather) or self (kScatterAdd)
  EMBER_HOST_DEVICE void operator()(int64_t lin) const {
    int64_t p, q;
    g.offsets(lin, idx, &p, &q);
    if constexpr (kMove == IndexMove::kGather) {
      to[p] = from[q];
    } else {
      atomic_add(to + q, from[p]);
    }
  }
};

template <typename T>
using GatherF = IndexMoveF<T, IndexMove::kGather>;
template <typename T>
using ScatterAddF = IndexMoveF<T, IndexMove::kScatterAdd>;

/// out[i, idx[i]] = 1 on a zeroed [n, num_classes] int64 output (indices checked before).
struct OneHotF {
  const int64_t* idx;
  int64_t num_classes;
  int64_t* out;
  EMBER_HOST_DEVICE void operator()(int64_t i) const { out[i * num_classes + idx[i]] = 1; }
};

}  // namespace ember::kernels
