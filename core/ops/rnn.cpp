// native::rnn_layer_forward / _backward (core/ops/nn_native.h): checks, then the stubs of
// core/ops/rnn_stubs.h.
#include "core/ops/rnn_stubs.h"

#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::native {

detail::DispatchStub<RnnLayerForwardFn> rnn_layer_forward_stub;
detail::DispatchStub<RnnLayerBackwardFn> rnn_layer_backward_stub;

const char* rnn_mode_name(RnnMode m) {
  switch (m) {
    case RnnMode::kRnnTanh: return "RNN_TANH";
    case RnnMode::kRnnRelu: return "RNN_RELU";
    case RnnMode::kLstm: return "LSTM";
    case RnnMode::kGru: return "GRU";
  }
  return "?";
}

std::shared_ptr<const PackedSteps> PackedSteps::make(std::vector<int64_t> batch_sizes) {
  auto s = std::make_shared<PackedSteps>();
  s->offsets.resize(batch_sizes.size());
  int64_t off = 0;
  for (size_t t = 0; t < batch_sizes.size(); ++t) {
    EMBER_CHECK_T(ValueError, batch_sizes[t] > 0 && (t == 0 || batch_sizes[t] <= batch_sizes[t - 1]),
                  "rnn: batch_sizes must be positive and non-increasing, got ", batch_sizes);
    s->offsets[t] = off;
    off += batch_sizes[t];
  }
  s->num_rows = off;
  s->batch_sizes = std::move(batch_sizes);
  return s;
}

RnnLayerForward rnn_layer_forward(RnnMode mode, const Tensor& input, const PackedSteps& steps, const Tensor& h0,
                                  const Tensor& c0, const std::vector<Tensor>& weights) {
  EMBER_INTERNAL_ASSERT(weights.size() == 4 || weights.size() == 8, "rnn_layer: ", weights.size(), " weights");
  EMBER_INTERNAL_ASSERT(!steps.batch_sizes.empty() && input.dim() == 2 && input.size(0) == steps.num_rows,
                        "rnn_layer: input ", input.sizes(), " for ", steps.num_rows, " packed rows");
  const int64_t D = static_cast<int64_t>(weights.size() / 4), H = weights[1].size(1), B = steps.batch_sizes[0];
  const bool lstm = mode == RnnMode::kLstm;
  EMBER_INTERNAL_ASSERT(h0.sizes() == (IntList{D, B, H}) && (!lstm || c0.sizes() == h0.sizes()), "rnn_layer: h0 ",
                        h0.sizes());
  EMBER_INTERNAL_ASSERT(input.dtype() == kFloat32 || input.dtype() == kFloat64, "rnn_layer: dtype ", input.dtype());
  return rnn_layer_forward_stub.kernel(input.device(), "rnn_layer_forward")(mode, input, steps, h0, c0, weights);
}

std::vector<Tensor> rnn_layer_backward(RnnMode mode, const PackedSteps& steps, const Tensor& input,
                                       const std::vector<Tensor>& w_ih, const std::vector<Tensor>& w_hh,
                                       const std::vector<RnnDirectionSaved>& saved, const Tensor& d_output,
                                       const Tensor& d_h_n, const Tensor& d_c_n, const std::vector<bool>& needs) {
  EMBER_INTERNAL_ASSERT(!w_ih.empty() && w_ih.size() == w_hh.size() && saved.size() == w_ih.size() &&
                            needs.size() == 3 + 4 * w_ih.size(),
                        "rnn_layer_backward: ", w_ih.size(), " directions, ", needs.size(), " gradients");
  return rnn_layer_backward_stub.kernel(input.device(), "rnn_layer_backward")(mode, steps, input, w_ih, w_hh, saved,
                                                                              d_output, d_h_n, d_c_n, needs);
}

}  // namespace ember::native
