// The dispatch stubs of the random ops (core/ops/random.cpp; Note [Dispatch stubs]). Kernels:
// core/kernels/cpu/random.cpp and core/kernels/cuda/random.cu.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/kernels/random.h"
#include "core/ops/detail/dispatch_stub.h"

namespace ember::native {

/// Fills r.out (contiguous, r.t.n elements of r.dtype) from the Philox stream at (r.t.seed,
/// r.t.offset), whose blocks the op reserved (kernels::random_launch_blocks).
using RandomFn = void(const kernels::RandomLaunch& r, int device_index);
/// The first i < n with p[i] outside [0, 1] (or NaN), or -1; floating dtypes. `slot`: 8 bytes
/// of scratch memory on the device. Waits for the device (it reads the answer).
using FirstInvalidProbabilityFn = int64_t(DType dtype, const void* p, int64_t n, void* slot, int device_index);

extern detail::DispatchStub<RandomFn> random_stub;
extern detail::DispatchStub<FirstInvalidProbabilityFn> first_invalid_probability_stub;

}  // namespace ember::native
