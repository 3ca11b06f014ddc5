// The recurrent ops of core/ops/nn_native.h: one layer (rnn_layer_forward / _backward) and the
// cuDNN stack (cudnn_rnn_forward / _backward, whether it is usable, the EMBER_CUDNN switch):
// checks, then the stubs of core/ops/rnn_stubs.h.
#include "core/ops/rnn_stubs.h"

#include <atomic>
#include <cstdint>

#include "core/env.h"
#include "core/ops/native.h"
#include "core/ops/nn_native.h"

namespace ember::native {

namespace {
// -1: not read yet; 0 off; 1 on.
std::atomic<int> g_cudnn_enabled{-1};
std::atomic<uint64_t> g_layer_forward_count{0};  // rnn_layer_forward_count()
std::atomic<uint64_t> g_cudnn_forward_count{0};  // cudnn_rnn_forward_count()
}  // namespace

detail::DispatchStub<RnnLayerForwardFn> rnn_layer_forward_stub;
detail::DispatchStub<RnnLayerBackwardFn> rnn_layer_backward_stub;
detail::DispatchStub<CudnnRnnForwardFn> cudnn_rnn_forward_stub;
detail::DispatchStub<CudnnRnnBackwardFn> cudnn_rnn_backward_stub;

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
  g_layer_forward_count.fetch_add(1, std::memory_order_relaxed);
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

uint64_t rnn_layer_forward_count() { return g_layer_forward_count.load(std::memory_order_relaxed); }

bool cudnn_enabled() {
  int v = g_cudnn_enabled.load(std::memory_order_relaxed);
  if (v < 0) {
    v = env::flag("EMBER_CUDNN", true) ? 1 : 0;
    int expected = -1;
    if (!g_cudnn_enabled.compare_exchange_strong(expected, v)) v = expected;
  }
  return v == 1;
}

void set_cudnn_enabled(bool on) { g_cudnn_enabled.store(on ? 1 : 0); }

uint64_t cudnn_rnn_forward_count() { return g_cudnn_forward_count.load(std::memory_order_relaxed); }

bool cudnn_rnn_usable(const CudnnRnnConfig& c, const Tensor& input) {
  if (!input.defined() || !cudnn_enabled()) return false;
  if (input.dtype() != kFloat32 && input.dtype() != kFloat64) return false;
  if (!cudnn_rnn_forward_stub.has_kernel(input.device().type)) return false;
  constexpr int64_t kMax = INT32_MAX;
  const int64_t D = c.bidirectional ? 2 : 1;
  return c.input_size <= kMax && c.hidden_size * D * gate_count(c.mode) <= kMax && c.num_layers * D <= kMax &&
         input.size(0) <= kMax;
}

void cudnn_rnn_record_stream(const CudnnRnnSaved& s, Stream stream) {
  for (const Tensor* t : {&s.weight_space, &s.reserve, &s.dev_seq_lengths}) {
    if (t->defined()) t->record_stream(stream);
  }
}

CudnnRnnForward cudnn_rnn_forward(const CudnnRnnConfig& c, const Tensor& input, const PackedSteps& steps,
                                  const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
                                  bool need_backward) {
  EMBER_INTERNAL_ASSERT(cudnn_rnn_forward_stub.has_kernel(input.device().type),
                        "cudnn_rnn_forward: cuDNN is not available for ", input.device());
  g_cudnn_forward_count.fetch_add(1, std::memory_order_relaxed);
  return cudnn_rnn_forward_stub.kernel(input.device(), "cudnn_rnn_forward")(c, input, steps, h0, c0, weights,
                                                                            need_backward);
}

CudnnRnnGrads cudnn_rnn_backward(const CudnnRnnConfig& c, const CudnnRnnSaved& saved, const Tensor& input,
                                 const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights,
                                 const Tensor& output, const Tensor& d_output, const Tensor& d_h_n,
                                 const Tensor& d_c_n, bool need_weights) {
  return cudnn_rnn_backward_stub.kernel(input.device(), "cudnn_rnn_backward")(c, saved, input, h0, c0, weights, output,
                                                                              d_output, d_h_n, d_c_n, need_weights);
}

}  // namespace ember::native
