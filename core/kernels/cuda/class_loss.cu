// CUDA launchers of the class-index losses: one thread per row running the functors of
// core/kernels/class_loss.h (the CPU grid-emulation tests run the same functors).
#include "core/cuda/cuda_device.h"
#include "core/kernels/cuda/kernels.h"
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/class_loss.h"

namespace ember::cuda {

void class_loss_forward(DType dtype, const kernels::ClassLossGeometry& g, bool from_logits, const void* x,
                        double* loss, double* lse, double* row_weight, int device_index) {
  CudaDeviceGuard guard(device_index);
  const int64_t rows = g.N * g.S;
  EMBER_DISPATCH_FLOATING(dtype, from_logits ? "cross_entropy" : "nll_loss", [&] {
    const auto* xp = static_cast<const scalar_t*>(x);
    if (from_logits) {
      launch_elements("cross_entropy", rows, kernels::CrossEntropyRowF<scalar_t>{g, xp, loss, lse, row_weight},
                      device_index);
    } else {
      launch_elements("nll_loss", rows, kernels::NllRowF<scalar_t>{g, xp, loss, row_weight}, device_index);
    }
  });
}

void class_loss_backward(DType dtype, const kernels::ClassLossGeometry& g, bool from_logits, const void* x,
                         const double* lse, const void* g_elem, double g_scalar, void* gx, int device_index) {
  CudaDeviceGuard guard(device_index);
  const int64_t rows = g.N * g.S;
  EMBER_DISPATCH_FLOATING(dtype, from_logits ? "cross_entropy_backward" : "nll_loss_backward", [&] {
    const auto* ge = static_cast<const scalar_t*>(g_elem);
    auto* out = static_cast<scalar_t*>(gx);
    if (from_logits) {
      launch_elements("cross_entropy_backward", rows,
                      kernels::CrossEntropyBackwardRowF<scalar_t>{g, static_cast<const scalar_t*>(x), lse, ge, g_scalar,
                                                                  out},
                      device_index);
    } else {
      launch_elements("nll_loss_backward", rows, kernels::NllBackwardRowF<scalar_t>{g, ge, g_scalar, out},
                      device_index);
    }
  });
}

}  // namespace ember::cuda
