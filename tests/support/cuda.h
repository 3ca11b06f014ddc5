// Shared by the GPU tests (ctest label gpu): the skip that names why a test did not run, and
// the device they use. Header-only.
#pragma once
#include <gtest/gtest.h>

#include "core/device.h"

/// Skips the test (with its reason) when no CUDA device is visible.
#define EMBER_REQUIRE_CUDA()                                                                   \
  if (::ember::cuda_device_count() == 0)                                                       \
  GTEST_SKIP() << "no CUDA device (ember was built with CUDA; this test needs a GPU)"

namespace ember::test_support {
inline constexpr Device kGpu = Device::cuda(0);
}  // namespace ember::test_support
