#include "core/kernels/cpu/norm.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/kernels/cpu/isa.h"
#include "core/kernels/cpu/vec_math.h"
#include "core/kernels/multi_tensor.h"
#include "core/kernels/norm.h"
#include "core/thread_pool.h"

namespace ember::kernels::cpu {
namespace {

constexpr int64_t kBlock = 512;  // float lanes accumulate this many elements before a double sum

// Sum of squares of n floats: float vector lanes per block of kBlock, blocks summed in double;
// the tail by the functors' norm_term.
template <int W>
EMBER_CPU_INLINE double sum_squares(const float* x, int64_t n) {
  using V = vfloat<W>;
  double total = 0.0;
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    V a = splat<V>(0.0f), b = a;
    for (int64_t k = 0; k < kBlock; k += 2 * W) {
      const V u = load<V>(x + i + k), v = load<V>(x + i + k + W);
      a += u * u;
      b += v * v;
    }
    total += static_cast<double>(hsum<W>(a + b));
  }
  for (; i < n; ++i) total += norm_term(static_cast<double>(x[i]), 2.0, NormReduce::kSum);
  return total;
}

// Any p, float32 or float64: the terms and combine of core/kernels/norm.h in element order.
template <typename T>
double generic_partial(const T* x, int64_t n, double p) {
  const NormReduce kind = norm_reduce_kind(p);
  const NormCombineF combine{kind};
  double acc = norm_identity(kind);
  for (int64_t i = 0; i < n; ++i) acc = combine(acc, norm_term(static_cast<double>(x[i]), p, kind));
  return acc;
}

template <int W>
EMBER_CPU_INLINE void scale_rows(float* x, int64_t n, float scale) {
  using V = vfloat<W>;
  const V sv = splat<V>(scale);
  int64_t i = 0;
  for (; i + W <= n; i += W) store(x + i, load<V>(x + i) * sv);
  for (; i < n; ++i) x[i] *= scale;
}

}  // namespace

EMBER_CPU_ISA_VARIANTS(void, scale_f32, (float* x, int64_t n, float scale), (x, n, scale), scale_rows<kW>(x, n, scale))
EMBER_CPU_ISA_VARIANTS(double, sum_squares_f32, (const float* x, int64_t n), (x, n), return sum_squares<kW>(x, n))

// Note [One pass over many tensors]
// clip_grad_norm_ sees many gradients, most of them small (biases, layer norms) and a few large.
// Splitting each tensor over the pool on its own serializes the small ones and pays a pool
// dispatch per large one; instead norm_partials and scale_inplace lay all tensors' elements end
// to end and make one parallel_for over that range (pieces of at least kNormChunk elements, so
// the work, not the tensor count, is balanced). For the norm, the unit of work stays one chunk
// of one tensor (kNormChunk elements from a tensor's start; the last one shorter: the chunk table
// of multi_tensor_chunks, Note [Multi-tensor launches], with kNormChunk per chunk): a piece
// computes the chunks that start inside it, each into its own slot, and the caller combines the
// slots in tensor then chunk order. Chunk boundaries and combine order never depend on the
// thread count, so neither does the result.

namespace {

// Pieces of at least one chunk; under four chunks in all, the calling thread does everything
// (too little work to pay for waking the pool).
int64_t grain_for(int64_t total) { return total >= 4 * kNormChunk ? kNormChunk : std::max<int64_t>(total, 1); }

double chunk_partial(DType dtype, const void* x, int64_t len, double p) {
  if (dtype == kFloat32 && p == 2.0) return sum_squares_f32(static_cast<const float*>(x), len);
  if (dtype == kFloat32) return generic_partial(static_cast<const float*>(x), len, p);
  EMBER_INTERNAL_ASSERT(dtype == kFloat64, "norm_partials: dtype ", dtype);
  return generic_partial(static_cast<const double*>(x), len, p);
}

void scale_range(DType dtype, void* x, int64_t n, double scale) {
  if (dtype == kFloat32) {
    scale_f32(static_cast<float*>(x), n, static_cast<float>(scale));
  } else {
    EMBER_INTERNAL_ASSERT(dtype == kFloat64, "scale_inplace: dtype ", dtype);
    double* p = static_cast<double*>(x);
    for (int64_t i = 0; i < n; ++i) p[i] *= scale;
  }
}

}  // namespace

std::vector<double> norm_partials(const std::vector<NormSpan>& spans, double p) {
  // The CUDA norm's chunk table (multi_tensor_chunks: each span's chunks from its start, in span
  // order) with kNormChunk elements per chunk, plus where each chunk starts among all spans'
  // elements end to end, for the pieces of the parallel_for below.
  std::vector<MultiTensorEntry> entries(spans.size());
  std::vector<int64_t> span_start(spans.size());
  int64_t total = 0;
  for (size_t s = 0; s < spans.size(); ++s) {
    entries[s].numel = spans[s].n;
    span_start[s] = total;
    total += spans[s].n;
  }
  const std::vector<MultiTensorChunk> chunks = multi_tensor_chunks(entries, kNormChunk);
  std::vector<int64_t> chunk_start(chunks.size());
  for (size_t c = 0; c < chunks.size(); ++c)
    chunk_start[c] = span_start[static_cast<size_t>(chunks[c].tensor)] + chunks[c].begin;
  std::vector<double> out(chunks.size());
  parallel_for(0, total, grain_for(total), [&](int64_t b, int64_t e) {
    // The chunks that start inside [b, e).
    size_t c = static_cast<size_t>(std::lower_bound(chunk_start.begin(), chunk_start.end(), b) - chunk_start.begin());
    for (; c < chunks.size() && chunk_start[c] < e; ++c) {
      const NormSpan& span = spans[static_cast<size_t>(chunks[c].tensor)];
      const void* x = static_cast<const char*>(span.x) + chunks[c].begin * static_cast<int64_t>(element_size(span.dtype));
      out[c] = chunk_partial(span.dtype, x, chunks[c].len, p);
    }
  });
  return out;
}

void scale_inplace(const std::vector<NormSpan>& spans, double scale) {
  std::vector<int64_t> starts(spans.size());
  int64_t total = 0;
  for (size_t s = 0; s < spans.size(); ++s) {
    starts[s] = total;
    total += spans[s].n;
  }
  parallel_for(0, total, grain_for(total), [&](int64_t b, int64_t e) {
    // The last span starting at or before b, then every span overlapping [b, e).
    size_t s = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), b) - starts.begin()) - 1;
    for (; s < spans.size() && starts[s] < e; ++s) {
      const int64_t lo = std::max(b, starts[s]) - starts[s], hi = std::min(e, starts[s] + spans[s].n) - starts[s];
      if (hi <= lo) continue;
      char* x = static_cast<char*>(spans[s].x) + lo * static_cast<int64_t>(element_size(spans[s].dtype));
      scale_range(spans[s].dtype, x, hi - lo, scale);
    }
  });
}

namespace {
std::vector<NormSpan> spans_of(const MultiTensorEntry* entries, int64_t n) {
  std::vector<NormSpan> spans;
  spans.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    spans.push_back({entries[i].is_f64 ? kFloat64 : kFloat32, entries[i].ptr[0], entries[i].numel});
  }
  return spans;
}
}  // namespace

double multi_tensor_norm(const MultiTensorEntry* entries, int64_t n, double p, int /*device_index*/) {
  const NormReduce kind = norm_reduce_kind(p);
  const NormCombineF combine{kind};
  double acc = norm_identity(kind);
  for (double v : norm_partials(spans_of(entries, n), p)) acc = combine(acc, v);
  return acc;
}

void multi_tensor_scale(const MultiTensorEntry* entries, int64_t n, double scale, int /*device_index*/) {
  scale_inplace(spans_of(entries, n), scale);
}

}  // namespace ember::kernels::cpu
