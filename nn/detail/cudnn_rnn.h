// The cuDNN RNN as one autograd node over a whole stack of layers (Note [cuDNN RNN] in
// core/ops/cudnn_rnn.cpp): the engine nn::RNN / LSTM / GRU use on CUDA when
// native::cudnn_rnn_usable says so, in place of one nn/detail/rnn_layer.h node per layer.
// Stateless and thread-safe; a recorded node is run by one engine thread at a time.
#pragma once
#include <memory>
#include <tuple>
#include <vector>

#include "core/ops/nn_native.h"
#include "core/tensor.h"

namespace ember::nn::detail {

/// data [N, F] packed rows (steps: their batch sizes); h0, c0 [L*D, B, H] in sorted batch order
/// (c0 LSTM only); weights: the module's parameters in registration order. Returns (output
/// [N, D*H], h_n, c_n), recorded as one node ("CudnnRnnBackward0") when anything requires grad.
std::tuple<Tensor, Tensor, Tensor> cudnn_rnn(const native::CudnnRnnConfig& config, const Tensor& data,
                                             const std::shared_ptr<const native::PackedSteps>& steps,
                                             const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights);

}  // namespace ember::nn::detail
