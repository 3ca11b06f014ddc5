// native::rnn_layer_forward / _backward (core/ops/nn_native.h): checks, state buffers, dispatch
// on device. CPU engine: core/kernels/cpu/rnn_layer.cpp; CUDA: the stepwise engine of
// core/ops/rnn_stepwise.cpp over cuBLAS GEMMs and the cell launchers of core/kernels/cuda/rnn_cell.cu.
#include "core/kernels/cpu/rnn_layer.h"
#include "core/ops/detail/plan.h"
#include "core/ops/detail/rnn_stepwise.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::native {

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

namespace {

// The CUDA cell launchers (null entries when CUDA is not built: require_cuda throws first).
detail::CellRunner cuda_cells(const char* op) {
  auto& k = detail::require_cuda(op);
  return detail::CellRunner{k.rnn_cell_f32, k.rnn_cell_f64};
}

}  // namespace

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
  if (input.device().is_cuda()) {
    return detail::rnn_layer_forward_stepwise(mode, input, steps, h0, c0, weights, cuda_cells("rnn_layer_forward"));
  }
  RnnLayerForward out;
  Tensor x = contiguous(input);
  out.output = empty({steps.num_rows, D * H}, TensorOptions(input.dtype()).device(input.device()));
  out.h_n = clone(contiguous(h0));
  if (lstm) out.c_n = clone(contiguous(c0));
  kernels::cpu::rnn_layer_forward(mode, steps, x, weights, out.output, out.h_n, out.c_n, out.saved);
  return out;
}

std::vector<Tensor> rnn_layer_backward(RnnMode mode, const PackedSteps& steps, const Tensor& input,
                                       const std::vector<Tensor>& w_ih, const std::vector<Tensor>& w_hh,
                                       const std::vector<RnnDirectionSaved>& saved, const Tensor& d_output,
                                       const Tensor& d_h_n, const Tensor& d_c_n, const std::vector<bool>& needs) {
  EMBER_INTERNAL_ASSERT(!w_ih.empty() && w_ih.size() == w_hh.size() && saved.size() == w_ih.size() &&
                            needs.size() == 3 + 4 * w_ih.size(),
                        "rnn_layer_backward: ", w_ih.size(), " directions, ", needs.size(), " gradients");
  if (input.device().is_cuda()) {
    return detail::rnn_layer_backward_stepwise(mode, steps, input, w_ih, w_hh, saved, d_output, d_h_n, d_c_n, needs,
                                               cuda_cells("rnn_layer_backward"));
  }
  return kernels::cpu::rnn_layer_backward(mode, steps, contiguous(input), w_ih, w_hh, saved, d_output, d_h_n, d_c_n,
                                          needs);
}

}  // namespace ember::native
