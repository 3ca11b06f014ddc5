// Helpers shared by the nn tests (layers, losses, optim, checkpoints): seeded random tensors,
// element-wise comparison with a readable failure, and the text of a thrown error.
// Header-only; tests only.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/error_text.h"
#include "core/generator.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "core/tensor.h"

namespace ember::nn::testing {

/// N(0, 1) from a private generator seeded with `seed`, in `dtype`.
inline Tensor randn_seeded(const IntList& sizes, uint64_t seed, DType dtype = kFloat64) {
  Generator g(seed);
  return native::to(randn(sizes, TensorOptions(kFloat32), &g), dtype);
}

inline Tensor leaf(const Tensor& t) {
  Tensor c = native::clone(t);
  c.requires_grad_(true);
  return c;
}

/// |a - b| <= atol + rtol * |b| element-wise; reports the first offending element.
using ember::operator<<;

inline ::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol = 1e-6,
                                            double atol = 1e-8) {
  if (a.sizes() != b.sizes()) {
    std::ostringstream os;
    os << "shapes differ: " << a.sizes() << " vs " << b.sizes();
    return ::testing::AssertionFailure() << os.str();
  }
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    bool both_nan = std::isnan(x[i]) && std::isnan(y[i]);
    if (!both_nan && !(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]))) {
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i]
                                           << " (|diff| " << std::abs(x[i] - y[i]) << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

/// Bitwise equality of two tensors' values (same dtype and shape).
inline bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  Tensor x = native::contiguous(a), y = native::contiguous(b);
  return std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

using support::error_of;

}  // namespace ember::nn::testing
