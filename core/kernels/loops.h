// The index arithmetic shared by the CPU and CUDA element-wise drivers: an ElementwisePlan
// holds the (coalesced) output shape and every operand's byte strides, broadcast to that
// shape. Operand 0 is the output. Plain data, host/device.
#pragma once
#include <cstdint>

#include "core/macros.h"

namespace ember::kernels {

constexpr int kMaxDims = 16;
constexpr int kMaxOperands = 4;

/// The lines of a contiguous tensor viewed as [outer, n, inner] along its middle dimension (the
/// softmax and scan dims): line l (of outer * inner) is elements base(l) + j * inner, j < n.
struct LineGeometry {
  int64_t inner = 1;  // stride between a line's elements
  int64_t n = 1;      // line length
  EMBER_HOST_DEVICE int64_t base(int64_t line) const { return (line / inner) * n * inner + line % inner; }
};

struct ElementwisePlan {
  int ndim = 0;
  int num_operands = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxDims] = {};                 // innermost dimension last
  int64_t strides[kMaxOperands][kMaxDims] = {};  // bytes
  char* data[kMaxOperands] = {};
  int device_index = 0;  // of the output (every operand is on its device): where a CUDA launch runs

  /// Byte offsets of linear index `i` for every operand.
  EMBER_HOST_DEVICE void offsets(int64_t i, int64_t* out) const {
    for (int k = 0; k < num_operands; ++k) out[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      int64_t idx = i % sizes[d];
      i /= sizes[d];
      for (int k = 0; k < num_operands; ++k) out[k] += idx * strides[k][d];
    }
  }
};

}  // namespace ember::kernels
