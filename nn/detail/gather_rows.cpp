#include "nn/detail/gather_rows.h"

#include "autograd/node.h"
#include "core/detail/checked_math.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::nn::detail {

void RowMap::compute_inverse(int64_t num_src_rows, const char* op) {
  ember::detail::translate_bad_alloc(op, ember::detail::host_bytes(static_cast<uint64_t>(num_src_rows), sizeof(int64_t)),
                                     [&] { inverse.assign(static_cast<size_t>(num_src_rows), -1); });
  for (size_t i = 0; i < index.size(); ++i) {
    int64_t r = index[i];
    if (r < 0) continue;
    EMBER_INTERNAL_ASSERT(r < num_src_rows && inverse[static_cast<size_t>(r)] == -1, "RowMap: row ", r,
                          " is out of range or taken twice");
    inverse[static_cast<size_t>(r)] = static_cast<int64_t>(i);
  }
}

Tensor gather_rows(const Tensor& src, const std::shared_ptr<const RowMap>& map, const IntList& out_sizes, double fill) {
  const int64_t num_src_rows = static_cast<int64_t>(map->inverse.size());
  Tensor out = native::gather_rows(src, map->index, num_src_rows, out_sizes, fill);
  autograd::record("GatherRowsBackward0", {&src}, {&out},
                   [map, src_sizes = src.sizes()](autograd::FunctionNode&, autograd::TensorList& g) {
                     if (!g[0].defined()) return autograd::TensorList{Tensor()};
                     return autograd::TensorList{
                         native::gather_rows(g[0], map->inverse, static_cast<int64_t>(map->index.size()), src_sizes, 0.0)};
                   });
  return out;
}

}  // namespace ember::nn::detail
