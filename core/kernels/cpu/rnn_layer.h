// The CPU engine of one recurrent layer (both directions when bidirectional) over packed rows:
// the input GEMM, per step the recurrent GEMM (PackedRhs or BLAS) and the fused cell kernel,
// and the backward in reverse step order. Called by native::rnn_layer_forward / _backward
// (core/ops/rnn.cpp), which check the arguments. See Note [RNN step buffers] in rnn_layer.cpp.
#pragma once
#include <vector>

#include "core/ops/nn_native.h"

namespace ember::kernels::cpu {

/// x contiguous [N, F]; h_n, c_n hold h0, c0 on entry (contiguous [D, B, H]) and the final
/// states on return; output [N, D*H] is written; saved gets one entry per direction.
void rnn_layer_forward(native::RnnMode mode, const native::PackedSteps& steps, const Tensor& x,
                       const std::vector<Tensor>& weights, Tensor& output, Tensor& h_n, Tensor& c_n,
                       std::vector<native::RnnDirectionSaved>& saved);

/// See native::rnn_layer_backward.
std::vector<Tensor> rnn_layer_backward(native::RnnMode mode, const native::PackedSteps& steps, const Tensor& x,
                                       const std::vector<Tensor>& w_ih, const std::vector<Tensor>& w_hh,
                                       const std::vector<native::RnnDirectionSaved>& saved, const Tensor& dy,
                                       const Tensor& dh_n, const Tensor& dc_n, const std::vector<bool>& needs);

}  // namespace ember::kernels::cpu
