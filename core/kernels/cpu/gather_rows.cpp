#include "core/kernels/cpu/gather_rows.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"

namespace ember::kernels::cpu {

void gather_rows(DType dtype, const int64_t* index, int64_t out_rows, int64_t cols, const void* src, const void* fill,
                 void* out, int /*device_index*/) {
  const size_t es = element_size(dtype), row_bytes = static_cast<size_t>(cols) * es;
  // The fill row: `fill` repeated, or zero bytes when fill is all zero bits.
  const char* fe = static_cast<const char*>(fill);
  std::vector<char> fill_row;
  if (std::any_of(fe, fe + es, [](char c) { return c != 0; })) {
    fill_row.resize(row_bytes);
    for (int64_t j = 0; j < cols; ++j) std::memcpy(fill_row.data() + static_cast<size_t>(j) * es, fe, es);
  }
  const char* sp = static_cast<const char*>(src);
  const char* fp = fill_row.empty() ? nullptr : fill_row.data();
  char* op = static_cast<char*>(out);
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(262144 / std::max<size_t>(row_bytes, 1)));
  parallel_for(0, out_rows, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      char* dst = op + static_cast<size_t>(i) * row_bytes;
      const int64_t r = index[i];
      if (r >= 0) {
        std::memcpy(dst, sp + static_cast<size_t>(r) * row_bytes, row_bytes);
      } else if (fp != nullptr) {
        std::memcpy(dst, fp, row_bytes);
      } else {
        std::memset(dst, 0, row_bytes);
      }
    }
  });
}

}  // namespace ember::kernels::cpu
