// Shared by the GPU tests (ctest label gpu): the skip that names why a test did not run, and
// the device they use. Header-only.
#pragma once
#include <gtest/gtest.h>

#include "core/device.h"
#include "core/generator.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"
#include "core/tensor.h"

/// Skips the test (with its reason) when no CUDA device is visible.
#define EMBER_REQUIRE_CUDA()                                                                   \
  if (::ember::cuda_device_count() == 0)                                                       \
  GTEST_SKIP() << "no CUDA device (ember was built with CUDA; this test needs a GPU)"

namespace ember::test_support {
inline constexpr Device kGpu = Device::cuda(0);

/// Standard normal values of `sizes` from a Generator seeded with `seed` (drawn in float64, then
/// converted to dt), the same on every device and run.
inline Tensor seeded(const IntList& sizes, uint64_t seed, DType dt) {
  Generator g(seed);
  return native::to(randn(sizes, TensorOptions(kFloat64), &g), dt);
}

/// A leaf that requires grad on `d` holding t's values (a copy even when t is already there).
inline Tensor leaf_on(const Tensor& t, Device d) {
  Tensor c = native::to(t, d);
  if (c.device() == t.device()) c = native::clone(t);
  c.requires_grad_(true);
  return c;
}
}  // namespace ember::test_support
