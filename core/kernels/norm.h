// The math of native::total_norm, once, as host/device functions: the term |x|^p of one element,
// how two partial results combine (sum, or NaN-propagating max / min for the infinity norms),
// and NormTermF, the term of one lane of a multi-tensor chunk table (Note [Multi-tensor
// launches] in core/kernels/multi_tensor.h) that the CUDA path reduces with CUB and the CPU
// grid-emulation tests reduce in order. The CPU kernel (core/kernels/cpu/norm.cpp) uses the
// same norm_term and norm_combine. Thread-safe (pure).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/kernels/math.h"
#include "core/kernels/multi_tensor.h"
#include "core/macros.h"

namespace ember::kernels {

enum class NormReduce : int32_t { kSum, kMax, kMin };

/// Sum for finite p; max |x| for +inf, min |x| for -inf.
inline NormReduce norm_reduce_kind(double p) {
  return std::isinf(p) ? (p > 0 ? NormReduce::kMax : NormReduce::kMin) : NormReduce::kSum;
}

/// The reduction's identity: 0 for sums and max |x|, +inf for min |x|.
EMBER_HOST_DEVICE inline double norm_identity(NormReduce kind) {
  return kind == NormReduce::kMin ? static_cast<double>(INFINITY) : 0.0;
}

/// |x|^p for finite p (exact products for p = 1, 2), |x| for the infinity norms.
EMBER_HOST_DEVICE EMBER_FORCE_INLINE double norm_term(double x, double p, NormReduce kind) {
  const double a = x < 0 ? -x : x;  // NaN stays NaN
  if (kind != NormReduce::kSum || p == 1.0) return a;
  return p == 2.0 ? a * a : k_pow(a, p);
}

/// Combines two partial results; NaN wins for max and min as it does for sums.
struct NormCombineF {
  NormReduce kind;
  EMBER_HOST_DEVICE EMBER_FORCE_INLINE double operator()(double a, double b) const {
    if (kind == NormReduce::kSum) return a + b;
    if (a != a) return a;
    if (b != b) return b;
    if (kind == NormReduce::kMax) return a > b ? a : b;
    return a < b ? a : b;
  }
};

/// The norm from the reduced partials: acc^(1/p) for finite p, acc itself for inf norms.
inline double finish_norm(double acc, double p) {
  if (std::isinf(p) || p == 1.0) return acc;
  if (p == 2.0) return std::sqrt(acc);
  return std::pow(acc, 1.0 / p);
}

/// The term of lane v of the virtual index space chunk * chunk_elems + j over a chunk table:
/// norm_term of that element of list 0 (float32 or float64 per entry.is_f64), or the identity
/// for lanes past the chunk's end.
struct NormTermF {
  const MultiTensorEntry* entries;
  const MultiTensorChunk* chunks;
  int64_t chunk_elems;
  double p;
  NormReduce kind;
  EMBER_HOST_DEVICE double operator()(int64_t v) const {
    const MultiTensorChunk ch = chunks[v / chunk_elems];
    const int64_t j = v % chunk_elems;
    if (j >= ch.len) return norm_identity(kind);
    const MultiTensorEntry& e = entries[ch.tensor];
    const int64_t i = ch.begin + j;
    const double x = e.is_f64 ? static_cast<const double*>(e.ptr[0])[i]
                              : static_cast<double>(static_cast<const float*>(e.ptr[0])[i]);
    return norm_term(x, p, kind);
  }
};

}  // namespace ember::kernels
