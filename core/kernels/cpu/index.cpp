#include "core/kernels/cpu/index.h"

#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"

namespace ember::kernels::cpu {
namespace {

int64_t work_items(const IndexGeometry& g) {
  int64_t n = 1;
  for (int d = 0; d < g.ndim; ++d) n *= g.sizes[d];
  return n;
}

// Elements per row when the geometry moves whole rows: the index is one per position along
// `dim` and the dimensions after `dim` are contiguous on both sides. 0 otherwise.
int64_t row_length(const IndexGeometry& g) {
  if (g.index_per_element) return 0;
  int64_t inner = 1;
  for (int d = g.ndim - 1; d > g.dim; --d) {
    if (g.plain[d] != inner && g.sizes[d] != 1) return 0;
    if (g.indexed[d] != inner && g.sizes[d] != 1) return 0;
    inner *= g.sizes[d];
  }
  return inner;
}

template <typename Row>
void for_each_row(const IndexGeometry& g, int64_t inner, int64_t rows, const int64_t* idx, bool parallel,
                  const Row& row) {
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t p, q;
      g.offsets(r * inner, idx, &p, &q);
      row(p, q);
    }
  };
  if (!parallel || rows * inner < 65536) {
    body(0, rows);
  } else {
    parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), body);
  }
}

template <typename T>
void scatter_add_typed(const IndexGeometry& g, const int64_t* idx, const T* src, T* self) {
  const int64_t n = work_items(g);
  if (n == 0) return;
  if (const int64_t inner = row_length(g); inner > 0) {
    for_each_row(g, inner, n / inner, idx, /*parallel=*/false, [&](int64_t p, int64_t q) {
      for (int64_t k = 0; k < inner; ++k) atomic_add(self + q + k, src[p + k]);
    });
    return;
  }
  const ScatterAddF<T> f{g, idx, src, self};
  for (int64_t i = 0; i < n; ++i) f(i);
}

}  // namespace

int64_t index_first_out_of_range(const int64_t* idx, int64_t n, int64_t size, bool allow_negative, void* /*slot*/,
                                 int /*device_index*/) {
  const IndexInRange ok{idx, size, allow_negative};
  for (int64_t i = 0; i < n; ++i) {
    if (!ok(i)) return i;
  }
  return -1;
}

void index_gather(DType dtype, const IndexGeometry& g, const int64_t* idx, const void* in, void* out,
                  int /*device_index*/) {
  const int64_t n = work_items(g);
  if (n == 0) return;
  if (const int64_t inner = row_length(g); inner > 0) {
    const size_t es = element_size(dtype), row_bytes = static_cast<size_t>(inner) * es;
    const char* from = static_cast<const char*>(in);
    char* to = static_cast<char*>(out);
    for_each_row(g, inner, n / inner, idx, /*parallel=*/true, [&](int64_t p, int64_t q) {
      std::memcpy(to + static_cast<size_t>(p) * es, from + static_cast<size_t>(q) * es, row_bytes);
    });
    return;
  }
  EMBER_DISPATCH_ALL(dtype, "gather", [&] {
    const GatherF<scalar_t> f{g, idx, static_cast<const scalar_t*>(in), static_cast<scalar_t*>(out)};
    for (int64_t i = 0; i < n; ++i) f(i);
  });
}

void index_scatter_add(DType dtype, const IndexGeometry& g, const int64_t* idx, const void* src, void* self,
                       const char* op, int /*device_index*/) {
  if (dtype == DType::BFloat16) {
    return scatter_add_typed(g, idx, static_cast<const BFloat16*>(src), static_cast<BFloat16*>(self));
  }
  if (dtype == DType::Float16) return scatter_add_typed(g, idx, static_cast<const Half*>(src), static_cast<Half*>(self));
  EMBER_DISPATCH_NUMERIC(dtype, op, [&] {
    scatter_add_typed(g, idx, static_cast<const scalar_t*>(src), static_cast<scalar_t*>(self));
  });
}

void one_hot(const int64_t* idx, int64_t n, int64_t num_classes, int64_t* out, int /*device_index*/) {
  const OneHotF f{idx, num_classes, out};
  for (int64_t i = 0; i < n; ++i) f(i);
}

}  // namespace ember::kernels::cpu
