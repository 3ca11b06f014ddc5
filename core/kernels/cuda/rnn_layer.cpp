// The CUDA kernels of rnn_layer_forward_stub / rnn_layer_backward_stub (core/ops/rnn_stubs.h):
// the device-neutral stepwise engine (core/ops/detail/rnn_stepwise.h) over cuBLAS GEMMs, with
// one cell launch per time step (rnn_cell.cu). Plain C++.
#include "core/kernels/cuda/rnn.h"

#include "core/kernels/cuda/kernels.h"
#include "core/ops/detail/rnn_stepwise.h"

namespace ember::cuda {
namespace {

const native::detail::CellRunner kCells{&rnn_cell_f32, &rnn_cell_f64};

}  // namespace

native::RnnLayerForward rnn_layer_forward(native::RnnMode mode, const Tensor& input, const native::PackedSteps& steps,
                                          const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights) {
  return native::detail::rnn_layer_forward_stepwise(mode, input, steps, h0, c0, weights, kCells);
}

std::vector<Tensor> rnn_layer_backward(native::RnnMode mode, const native::PackedSteps& steps, const Tensor& input,
                                       const std::vector<Tensor>& w_ih, const std::vector<Tensor>& w_hh,
                                       const std::vector<native::RnnDirectionSaved>& saved, const Tensor& d_output,
                                       const Tensor& d_h_n, const Tensor& d_c_n, const std::vector<bool>& needs) {
  return native::detail::rnn_layer_backward_stepwise(mode, steps, input, w_ih, w_hh, saved, d_output, d_h_n, d_c_n,
                                                     needs, kCells);
}

}  // namespace ember::cuda
