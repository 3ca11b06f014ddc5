// The autograd function of the recurrent stack behind nn::RNN / LSTM / GRU: over packed rows,
// either the whole stack as ONE cuDNN node (Note [cuDNN RNN] in core/kernels/cuda/cudnn_rnn.cpp)
// or one node per layer (both directions) whose forward and backward are
// native::rnn_layer_forward / _backward (Note [RNN step buffers] in core/kernels/cpu/rnn_layer.cpp),
// with dropout between layers. The module (nn/rnn.cpp) checks shapes, dtypes and states and
// handles batch_first, unbatched input, packing order and autocast. Stateless and thread-safe;
// a recorded node is run by one engine thread at a time.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/ops/nn_native.h"
#include "core/tensor.h"

namespace ember::autograd::functions {

struct RnnOutputs {
  Tensor output;  // [N, D*H]: direction d in columns [d*H, (d+1)*H)
  Tensor h_n;     // [L*D, B, H] for the stack, [D, B, H] for one layer
  Tensor c_n;     // LSTM only; undefined otherwise
};

/// The stack of c.num_layers layers over packed rows `data` [N, F] (steps: their batch sizes);
/// h0, c0 [L*D, B, H] in sorted batch order (c0 LSTM only; undefined: zeros); weights: the
/// module's parameters in registration order (w_ih, w_hh[, b_ih, b_hh] per layer and direction).
/// Runs through cuDNN when native::cudnn_rnn_usable(c, data) (node "CudnnRnnBackward0"), else
/// layer by layer (rnn_layer) with inter-layer dropout while c.training.
RnnOutputs rnn(const native::CudnnRnnConfig& c, const Tensor& data, const std::shared_ptr<const native::PackedSteps>& steps,
               const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights);

/// One layer: input [N, F] (packed rows); h0, c0 [D, B, H] (c0 LSTM only, else undefined) with
/// B = batch_sizes[0]; weights: for each direction {w_ih [G*H, F], w_hh [G*H, H], b_ih [G*H],
/// b_hh [G*H]} with undefined biases when the layer has none. float32 or float64. Recorded as
/// one node ("LSTMLayerBackward0", ...) when anything requires grad. Mismatches are internal errors.
RnnOutputs rnn_layer(native::RnnMode mode, const Tensor& input, const std::shared_ptr<const native::PackedSteps>& steps,
                     const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights);

}  // namespace ember::autograd::functions
