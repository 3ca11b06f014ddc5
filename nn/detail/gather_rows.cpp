#include "nn/detail/gather_rows.h"

#include <cstring>

#include "autograd/node.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/thread_pool.h"

namespace ember::nn::detail {

void RowMap::compute_inverse(int64_t num_src_rows) {
  inverse.assign(static_cast<size_t>(num_src_rows), -1);
  for (size_t i = 0; i < index.size(); ++i) {
    int64_t r = index[i];
    if (r < 0) continue;
    EMBER_INTERNAL_ASSERT(r < num_src_rows && inverse[static_cast<size_t>(r)] == -1, "RowMap: row ", r,
                          " is out of range or taken twice");
    inverse[static_cast<size_t>(r)] = static_cast<int64_t>(i);
  }
}

namespace {

// out[i] = src[index[i]] over rows of `row_bytes`; `fill_row` (row_bytes) where index[i] == -1.
Tensor gather_kernel(const Tensor& src, const std::vector<int64_t>& index, int64_t num_src_rows,
                     const IntList& out_sizes, double fill) {
  Tensor sc = native::contiguous(src);
  EMBER_INTERNAL_ASSERT(num_src_rows > 0 ? sc.numel() % num_src_rows == 0 : sc.numel() == 0,
                        "gather_rows: source of ", sc.numel(), " elements is not ", num_src_rows, " rows");
  const int64_t cols = num_src_rows > 0 ? sc.numel() / num_src_rows : 0;
  const int64_t out_rows = static_cast<int64_t>(index.size());
  EMBER_INTERNAL_ASSERT(numel_of(out_sizes) == out_rows * cols, "gather_rows: output shape ", out_sizes,
                        " does not hold ", out_rows, " rows of ", cols);
  Tensor out = empty(out_sizes, TensorOptions(src.dtype()).device(src.device()));
  if (out.numel() == 0) return out;
  const size_t row_bytes = static_cast<size_t>(cols) * src.element_size();
  Tensor fill_row;
  if (fill != 0.0) fill_row = full({cols}, fill, TensorOptions(src.dtype()));
  const char* sp = static_cast<const char*>(sc.raw_data());
  char* op = static_cast<char*>(out.raw_data());
  const char* fp = fill_row.defined() ? static_cast<const char*>(fill_row.raw_data()) : nullptr;
  const int64_t* idx = index.data();
  int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(262144 / std::max<size_t>(row_bytes, 1)));
  parallel_for(0, out_rows, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      char* dst = op + static_cast<size_t>(i) * row_bytes;
      int64_t r = idx[i];
      if (r >= 0) {
        std::memcpy(dst, sp + static_cast<size_t>(r) * row_bytes, row_bytes);
      } else if (fp != nullptr) {
        std::memcpy(dst, fp, row_bytes);
      } else {
        std::memset(dst, 0, row_bytes);
      }
    }
  });
  return out;
}

}  // namespace

Tensor gather_rows(const Tensor& src, const std::shared_ptr<const RowMap>& map, const IntList& out_sizes, double fill) {
  EMBER_CHECK(src.device().is_cpu(), "gather_rows: only CPU tensors are supported in this build, got ", src.device());
  const int64_t num_src_rows = static_cast<int64_t>(map->inverse.size());
  Tensor out = gather_kernel(src, map->index, num_src_rows, out_sizes, fill);
  autograd::record("GatherRowsBackward0", {&src}, {&out},
                   [map, src_sizes = src.sizes()](autograd::FunctionNode&, autograd::TensorList& g) {
                     if (!g[0].defined()) return autograd::TensorList{Tensor()};
                     return autograd::TensorList{
                         gather_kernel(g[0], map->inverse, static_cast<int64_t>(map->index.size()), src_sizes, 0.0)};
                   });
  return out;
}

}  // namespace ember::nn::detail
