#include "core/kernels/cpu/gather_rows.h"

#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"

namespace ember::kernels::cpu {

void gather_rows(const void* src, const int64_t* index, int64_t out_rows, size_t row_bytes, const void* fill_row,
                 void* out) {
  const char* sp = static_cast<const char*>(src);
  const char* fp = static_cast<const char*>(fill_row);
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
