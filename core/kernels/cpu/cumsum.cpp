#include "core/kernels/cpu/cumsum.h"

#include <algorithm>

#include "core/kernels/cumsum.h"
#include "core/thread_pool.h"

namespace ember::kernels::cpu {

void cumsum(DType dtype, int64_t outer, int64_t n, int64_t inner, bool reverse, const void* in, void* out,
            int /*device_index*/) {
  visit_cumsum(dtype, LineGeometry{inner, n}, reverse, in, out, outer * inner, [&](const auto& f, int64_t lines) {
    parallel_for(0, lines, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      for (int64_t l = b; l < e; ++l) f(l);
    });
  });
}

}  // namespace ember::kernels::cpu
