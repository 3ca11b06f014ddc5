// The CUDA kernels of the recurrent layer's stubs (core/ops/rnn_stubs.h), in rnn_layer.cpp.
#pragma once
#include <vector>

#include "core/ops/nn_native.h"

namespace ember::cuda {

native::RnnLayerForward rnn_layer_forward(native::RnnMode mode, const Tensor& input, const native::PackedSteps& steps,
                                          const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights);
std::vector<Tensor> rnn_layer_backward(native::RnnMode mode, const native::PackedSteps& steps, const Tensor& input,
                                       const std::vector<Tensor>& w_ih, const std::vector<Tensor>& w_hh,
                                       const std::vector<native::RnnDirectionSaved>& saved, const Tensor& d_output,
                                       const Tensor& d_h_n, const Tensor& d_c_n, const std::vector<bool>& needs);

}  // namespace ember::cuda
