// One recurrent layer (both directions when bidirectional) over packed data, recorded as ONE
// autograd node whose forward and backward are native::rnn_layer_forward / _backward: the
// engine behind nn::RNN/LSTM/GRU (nn/rnn.h). See Note [RNN step buffers] in
// core/kernels/cpu/rnn_layer.cpp for the algorithm. Stateless and
// thread-safe; a recorded node is run by one engine thread at a time.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/ops/nn_native.h"
#include "core/tensor.h"

namespace ember::nn::detail {

// The layer's kernels are native ops (core/ops/nn_native.h); their types keep these names here.
using native::gate_count;
using native::PackedSteps;
using native::RnnMode;
inline const char* mode_name(RnnMode m) { return native::rnn_mode_name(m); }

struct RnnLayerOutputs {
  Tensor output;  // [N, D*H]: direction d in columns [d*H, (d+1)*H)
  Tensor h_n;     // [D, B, H]
  Tensor c_n;     // LSTM: [D, B, H]; undefined otherwise
};

/// input [N, F] (packed rows); h0, c0 [D, B, H] (c0 LSTM only, else undefined) with
/// B = batch_sizes[0]; weights: for each direction {w_ih [G*H, F], w_hh [G*H, H], b_ih [G*H],
/// b_hh [G*H]} with undefined biases when the layer has none. float32 or float64.
/// Shapes and dtypes are the caller's (nn::RNNBase) to check; mismatches are internal errors.
RnnLayerOutputs rnn_layer(RnnMode mode, const Tensor& input, const std::shared_ptr<const PackedSteps>& steps,
                          const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights);

}  // namespace ember::nn::detail
