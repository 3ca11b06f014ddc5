// The exact fixed-point sums (core/ops/fixed_point.h): checks, then the device's kernel through
// the stubs of core/ops/fixed_point_stubs.h.
#include "core/ops/fixed_point.h"

#include <cmath>

#include "core/error.h"
#include "core/kernels/fixed_point.h"
#include "core/ops/fixed_point_stubs.h"
#include "core/ops/native.h"

namespace ember::native {

detail::DispatchStub<FixedPointMaxAbsFn> fixed_point_max_abs_stub;
detail::DispatchStub<FixedPointAccumulateFn> fixed_point_accumulate_stub;
detail::DispatchStub<FixedPointToFloatFn> fixed_point_to_float_stub;

namespace {

void check_float(const Tensor& t, const char* op, const char* what) {
  EMBER_CHECK_T(ValueError, t.defined(), op, ": ", what, " is undefined");
  EMBER_CHECK_T(TypeError, t.dtype() == kFloat32 || t.dtype() == kFloat64, op, ": expected ", what,
                " of dtype float32 or float64, got ", t.dtype());
}

void check_acc(const Tensor& acc, const Tensor& other, const char* op) {
  EMBER_CHECK_T(ValueError, acc.defined(), op, ": the accumulator is undefined");
  EMBER_CHECK_T(TypeError, acc.dtype() == kInt64, op, ": expected an int64 accumulator, got ", acc.dtype());
  EMBER_CHECK_T(ValueError, acc.is_contiguous() && acc.numel() == other.numel(), op,
                ": expected a contiguous accumulator of ", other.numel(), " elements, got ", acc.sizes(),
                acc.is_contiguous() ? "" : " (not contiguous)");
  EMBER_CHECK_T(DeviceError, acc.device() == other.device(), op, ": the accumulator is on ", acc.device().str(),
                " and the float tensor on ", other.device().str(), "; expected one device");
}

}  // namespace

double fixed_point_max_abs(const Tensor& x) {
  check_float(x, "fixed_point_max_abs", "the tensor");
  const Tensor c = contiguous(x);
  if (c.numel() == 0) return 0.0;
  return fixed_point_max_abs_stub.kernel(c.device(), "fixed_point_max_abs")(c.dtype(), c.raw_data(), c.numel(),
                                                                             c.device().index);
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
  check_acc(acc, x, "fixed_point_accumulate_");
  const Tensor c = contiguous(x);
  if (c.numel() > 0) {
    fixed_point_accumulate_stub.kernel(c.device(), "fixed_point_accumulate_")(
        c.dtype(), c.raw_data(), acc.data_ptr<int64_t>(), c.numel(), exponent, c.device().index);
  }
  acc.bump_version();
}

void fixed_point_to_float_(const Tensor& out, const Tensor& acc, int exponent, double divisor) {
  check_float(out, "fixed_point_to_float_", "the output");
  EMBER_CHECK_T(ValueError, out.is_contiguous(), "fixed_point_to_float_: the output must be contiguous");
  check_acc(acc, out, "fixed_point_to_float_");
  EMBER_CHECK_T(ValueError, std::isfinite(divisor) && divisor != 0.0,
                "fixed_point_to_float_: expected a finite nonzero divisor, got ", divisor);
  if (out.numel() > 0) {
    fixed_point_to_float_stub.kernel(out.device(), "fixed_point_to_float_")(
        out.dtype(), acc.data_ptr<int64_t>(), out.raw_data(), out.numel(), exponent, divisor, out.device().index);
  }
  out.bump_version();
}

}  // namespace ember::native
