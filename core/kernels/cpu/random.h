// CPU kernels of the random ops: the stubs of core/ops/random_stubs.h, running the per-block
// functors of core/kernels/random.h over the thread pool. Every element's numbers come from a
// fixed Philox block (Note [Philox stream layout], core/kernels/philox.h), so the result does
// not depend on the thread count, and float32/float64 match the CUDA kernel's.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/kernels/random.h"

namespace ember::kernels::cpu {

/// Fills r.out (contiguous, r.t.n elements of r.dtype). Floating fills take every floating
/// dtype (16-bit ones through float), kBernoulliScalar any dtype, kRandint the numeric ones.
void random_fill(const RandomLaunch& r, int device_index);
int64_t first_invalid_probability(DType dtype, const void* p, int64_t n, void* slot, int device_index);

}  // namespace ember::kernels::cpu
