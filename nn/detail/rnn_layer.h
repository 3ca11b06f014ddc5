// One recurrent layer (both directions when bidirectional) over packed data, recorded as ONE
// autograd node with a hand-written backward: the CPU engine behind nn::RNN/LSTM/GRU
// (nn/rnn.h). See Note [RNN step buffers] in rnn_layer.cpp for the algorithm. Stateless and
// thread-safe; a recorded node is run by one engine thread at a time.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace ember::nn::detail {

enum class RnnMode : int8_t { kRnnTanh, kRnnRelu, kLstm, kGru };

/// Gate blocks per hidden unit: LSTM 4 (i, f, g, o), GRU 3 (r, z, n), RNN 1.
constexpr int64_t gate_count(RnnMode m) { return m == RnnMode::kLstm ? 4 : m == RnnMode::kGru ? 3 : 1; }
const char* mode_name(RnnMode m);  // "LSTM", "GRU", "RNN_TANH", "RNN_RELU"

/// The time structure of packed data: batch_sizes[t] active rows at step t, starting at row
/// offsets[t]; batch_sizes is positive and non-increasing.
struct PackedSteps {
  std::vector<int64_t> batch_sizes;
  std::vector<int64_t> offsets;
  int64_t num_rows = 0;
  /// Builds offsets and num_rows; throws ValueError for sizes that are not positive non-increasing.
  static std::shared_ptr<const PackedSteps> make(std::vector<int64_t> batch_sizes);
};

struct RnnLayerOutputs {
  Tensor output;  // [N, D*H]: direction d in columns [d*H, (d+1)*H)
  Tensor h_n;     // [D, B, H]
  Tensor c_n;     // LSTM: [D, B, H]; undefined otherwise
};

/// input [N, F] (packed rows); h0, c0 [D, B, H] (c0 LSTM only, else undefined) with
/// B = batch_sizes[0]; weights: for each direction {w_ih [G*H, F], w_hh [G*H, H], b_ih [G*H],
/// b_hh [G*H]} with undefined biases when the layer has none. float32 or float64, on the CPU.
/// Shapes and dtypes are the caller's (nn::RNNBase) to check; mismatches are internal errors.
RnnLayerOutputs rnn_layer(RnnMode mode, const Tensor& input, const std::shared_ptr<const PackedSteps>& steps,
                          const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights);

}  // namespace ember::nn::detail
