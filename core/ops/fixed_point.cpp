#include "core/ops/fixed_point.h"

#include <cmath>

#include "core/error.h"
#include "core/kernels/cpu/fixed_point.h"
#include "core/kernels/fixed_point.h"
#include "core/ops/native.h"

namespace ember::native {
namespace {

void check_float(const Tensor& t, const char* op, const char* what) {
  EMBER_CHECK_T(ValueError, t.defined(), op, ": ", what, " is undefined");
  EMBER_CHECK_T(TypeError, t.dtype() == kFloat32 || t.dtype() == kFloat64, op, ": expected ", what,
                " of dtype float32 or float64, got ", t.dtype());
  EMBER_CHECK_T(NotImplementedError, t.device().is_cpu(), op, ": ", what, " is on ", t.device().str(),
                "; the fixed-point sum has a CPU driver only (its functors are in core/kernels/fixed_point.h)");
}

void check_acc(const Tensor& acc, int64_t numel, const char* op) {
  EMBER_CHECK_T(ValueError, acc.defined(), op, ": the accumulator is undefined");
  EMBER_CHECK_T(TypeError, acc.dtype() == kInt64, op, ": expected an int64 accumulator, got ", acc.dtype());
  EMBER_CHECK_T(ValueError, acc.is_contiguous() && acc.numel() == numel, op, ": expected a contiguous accumulator of ",
                numel, " elements, got ", acc.sizes(), acc.is_contiguous() ? "" : " (not contiguous)");
  EMBER_CHECK_T(NotImplementedError, acc.device().is_cpu(), op, ": the accumulator is on ", acc.device().str(),
                "; the fixed-point sum has a CPU driver only");
}

}  // namespace

double fixed_point_max_abs(const Tensor& x) {
  check_float(x, "fixed_point_max_abs", "the tensor");
  const Tensor c = contiguous(x);
  return kernels::cpu::fixed_point_max_abs(c.dtype(), c.raw_data(), c.numel());
}

int fixed_point_exponent(double max_abs, int64_t num_terms) {
  EMBER_CHECK_T(ValueError, std::isfinite(max_abs) && max_abs >= 0.0,
                "fixed_point_exponent: expected a finite max |x| >= 0, got ", max_abs);
  EMBER_CHECK_T(ValueError, num_terms >= 1 && num_terms <= (int64_t{1} << 20),
                "fixed_point_exponent: expected 1 to 2^20 terms, got ", num_terms);
  return kernels::fixed_point_exponent(max_abs, num_terms);
}

void fixed_point_accumulate_(const Tensor& acc, const Tensor& x, int exponent) {
  check_float(x, "fixed_point_accumulate_", "the term");
  check_acc(acc, x.numel(), "fixed_point_accumulate_");
  const Tensor c = contiguous(x);
  kernels::cpu::fixed_point_accumulate(c.dtype(), c.raw_data(), acc.data_ptr<int64_t>(), c.numel(), exponent);
  acc.bump_version();
}

void fixed_point_to_float_(const Tensor& out, const Tensor& acc, int exponent, double divisor) {
  check_float(out, "fixed_point_to_float_", "the output");
  EMBER_CHECK_T(ValueError, out.is_contiguous(), "fixed_point_to_float_: the output must be contiguous");
  check_acc(acc, out.numel(), "fixed_point_to_float_");
  EMBER_CHECK_T(ValueError, std::isfinite(divisor) && divisor != 0.0,
                "fixed_point_to_float_: expected a finite nonzero divisor, got ", divisor);
  kernels::cpu::fixed_point_to_float(out.dtype(), acc.data_ptr<int64_t>(), out.raw_data(), out.numel(), exponent,
                                     divisor);
  out.bump_version();
}

}  // namespace ember::native
