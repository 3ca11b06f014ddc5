// CUDA launchers of the recurrent cells' pointwise step (core/kernels/rnn_cell.h: CellForwardF,
// CellBackwardF), one thread per (row, hidden unit), on the current stream. The layer around
// them (GEMMs on cuBLAS, state copies) is the device-neutral engine of core/ops/rnn_stepwise.cpp.
#include "core/cuda/cuda_device.h"
#include "core/kernels/cuda/kernels.h"
#include "core/kernels/cuda/launch.cuh"
#include "core/kernels/rnn_cell.h"

namespace ember::cuda {
namespace {

template <typename T>
void launch_cell(kernels::RnnMode kind, bool backward, const kernels::CellStep<T>& s, int64_t rows,
                 int device_index) {
  CudaDeviceGuard guard(device_index);
  const int64_t n = rows * s.hidden;
  if (backward) {
    launch_elements("rnn_cell_backward", n, kernels::CellBackwardF<T>{s, kind}, device_index);
  } else {
    launch_elements("rnn_cell_forward", n, kernels::CellForwardF<T>{s, kind}, device_index);
  }
}

}  // namespace

void rnn_cell_f32(kernels::RnnMode kind, bool backward, const kernels::CellStep<float>& s, int64_t rows,
                  int device_index) {
  launch_cell(kind, backward, s, rows, device_index);
}

void rnn_cell_f64(kernels::RnnMode kind, bool backward, const kernels::CellStep<double>& s, int64_t rows,
                  int device_index) {
  launch_cell(kind, backward, s, rows, device_index);
}

}  // namespace ember::cuda
