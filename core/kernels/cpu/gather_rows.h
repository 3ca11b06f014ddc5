// CPU kernel of native::gather_rows: out row i = src row index[i] (memcpy over the thread pool),
// or the fill row where index[i] == -1.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ember::kernels::cpu {

/// fill_row null: zeros. Rows of row_bytes bytes; index entries are -1 or valid source rows.
void gather_rows(const void* src, const int64_t* index, int64_t out_rows, size_t row_bytes, const void* fill_row,
                 void* out);

}  // namespace ember::kernels::cpu
