// Tensor-level entry points of the exact fixed-point sums (Note [Fixed-point gradient sums] in
// core/kernels/fixed_point.h): checks, then the device's kernel (core/ops/fixed_point_stubs.h).
// CPU and CUDA tensors alike; the bits do not depend on the device. Thread-safe (no shared state).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace ember::native {

/// max |x| over a float32/float64 tensor, +Inf if it holds a NaN or Inf; 0 when empty.
/// Throws TypeError for another dtype. Waits for the result (a device-to-host copy on CUDA).
double fixed_point_max_abs(const Tensor& x);

/// The exponent for a sum of `num_terms` tensors whose largest |element| is max_abs
/// (kernels::fixed_point_exponent). ValueError unless max_abs is finite and >= 0 and
/// 1 <= num_terms <= 2^20.
int fixed_point_exponent(double max_abs, int64_t num_terms);

/// acc += nearbyint(x * 2^exponent), element by element. acc: contiguous int64 of x's numel on
/// x's device; x float32/float64 (any strides). ValueError/TypeError naming what differs.
void fixed_point_accumulate_(const Tensor& acc, const Tensor& x, int exponent);

/// out = (acc * 2^-exponent) / divisor, rounded to out's dtype (float32/float64, contiguous,
/// acc's numel).
void fixed_point_to_float_(const Tensor& out, const Tensor& acc, int exponent, double divisor);

}  // namespace ember::native
