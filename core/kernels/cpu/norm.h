// CPU kernels of native::total_norm and scale_all_ over many tensors at once: partial sums of
// |x|^p over fixed chunks of each tensor, so the summation order (and the result) does not
// depend on the thread count; and the scaling. Stateless; each call may use the thread pool.
#pragma once
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/kernels/multi_tensor.h"

namespace ember::kernels::cpu {

/// Elements per partial sum.
constexpr int64_t kNormChunk = 65536;

/// The contiguous elements of one tensor (float32 or float64).
struct NormSpan {
  DType dtype;
  void* x;
  int64_t n;
};

/// Partial results of every span: for each span in order, its chunks of kNormChunk elements in
/// order, out[k] = sum |x|^p over chunk k (p == inf: max |x|, p == -inf: min |x|). One parallel
/// pass: the elements of all spans together are split over the thread pool (Note [One pass over
/// many tensors]); each chunk's result is the same whichever thread computes it.
std::vector<double> norm_partials(const std::vector<NormSpan>& spans, double p);

/// x *= scale over every span, in one parallel pass over all their elements together.
void scale_inplace(const std::vector<NormSpan>& spans, double scale);

/// The kernels of the multi-tensor stubs (core/ops/multi_tensor_stubs.h) over the entries' list
/// 0: the partials of norm_partials combined in order (not finished), and scale_inplace.
double multi_tensor_norm(const MultiTensorEntry* entries, int64_t n, double p, int device_index);
void multi_tensor_scale(const MultiTensorEntry* entries, int64_t n, double scale, int device_index);

}  // namespace ember::kernels::cpu
