// The CPU engine of one recurrent layer (both directions when bidirectional) over packed rows:
// the input GEMM, per step the recurrent GEMM (PackedRhs or BLAS) and the fused cell kernel,
// and the backward in reverse step order. Run by native::rnn_layer_forward / _backward
// (core/ops/rnn.cpp) through their stubs, after the arguments are checked. See Note [RNN step buffers] in rnn_layer.cpp.
#pragma once
#include <vector>

#include "core/ops/nn_native.h"

namespace ember::kernels::cpu {

/// The kernels of rnn_layer_forward_stub / rnn_layer_backward_stub (core/ops/rnn_stubs.h).
native::RnnLayerForward rnn_layer_forward(native::RnnMode mode, const Tensor& input, const native::PackedSteps& steps,
                                          const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights);
std::vector<Tensor> rnn_layer_backward(native::RnnMode mode, const native::PackedSteps& steps, const Tensor& input,
                                       const std::vector<Tensor>& w_ih, const std::vector<Tensor>& w_hh,
                                       const std::vector<native::RnnDirectionSaved>& saved, const Tensor& d_output,
                                       const Tensor& d_h_n, const Tensor& d_c_n, const std::vector<bool>& needs);

}  // namespace ember::kernels::cpu
