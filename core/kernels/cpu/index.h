// CPU kernels of the indexing ops: the stubs of core/ops/index_stubs.h, running the functors of
// core/kernels/index.h. Where a geometry moves whole rows (index_select, index_add_ with the
// elements after `dim` contiguous on both sides) a row is one memcpy or one add loop.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/kernels/index.h"

namespace ember::kernels::cpu {

int64_t index_first_out_of_range(const int64_t* idx, int64_t n, int64_t size, bool allow_negative, void* slot,
                                 int device_index);
/// Rows in parallel (each output element is written once).
void index_gather(DType dtype, const IndexGeometry& g, const int64_t* idx, const void* in, void* out,
                  int device_index);
/// Serial, in work-item order: an element hit several times sums in index order, on every run.
void index_scatter_add(DType dtype, const IndexGeometry& g, const int64_t* idx, const void* src, void* self,
                       const char* op, int device_index);
void one_hot(const int64_t* idx, int64_t n, int64_t num_classes, int64_t* out, int device_index);

}  // namespace ember::kernels::cpu
