// The recurrent stack's autograd function: see autograd/functions/rnn.h.
#include "autograd/functions/rnn.h"

#include <string>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/ops/factory.h"
#include "core/ops/native.h"
#include "core/ops/random.h"

namespace ember::autograd::functions {
namespace {

using native::PackedSteps;
using native::RnnMode;

const char* layer_node_name(RnnMode m) {
  switch (m) {
    case RnnMode::kLstm: return "LSTMLayerBackward0";
    case RnnMode::kGru: return "GRULayerBackward0";
    case RnnMode::kRnnTanh: return "RNN_TANHLayerBackward0";
    case RnnMode::kRnnRelu: return "RNN_RELULayerBackward0";
  }
  return "RNNLayerBackward0";
}

bool any_input_requires_grad(const std::vector<const Tensor*>& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs) {
    if (t->defined() && t->requires_grad()) return true;
  }
  return false;
}

// Inputs: (input, h0, c0, per direction w_ih, w_hh, b_ih, b_hh); outputs: (output, h_n[, c_n]).
class RnnLayerNode final : public FunctionNode {
 public:
  RnnLayerNode(RnnMode mode, std::shared_ptr<const PackedSteps> steps)
      : FunctionNode(layer_node_name(mode)), mode_(mode), steps_(std::move(steps)) {}

  RnnMode mode_;
  std::shared_ptr<const PackedSteps> steps_;
  SavedVariable x_;
  std::vector<SavedVariable> w_ih_, w_hh_;
  std::vector<native::RnnDirectionSaved> saved_;

 protected:
  TensorList call(TensorList& grads) override {
    const std::string op = name();
    const Tensor x = x_.unpack(op.c_str());
    std::vector<Tensor> w_ih, w_hh;
    for (const auto& w : w_ih_) w_ih.push_back(w.unpack(op.c_str()));
    for (const auto& w : w_hh_) w_hh.push_back(w.unpack(op.c_str()));
    std::vector<bool> needs(next_edges_.size());
    for (size_t i = 0; i < needs.size(); ++i) needs[i] = needs_input_grad(i);
    auto at = [&](size_t i) { return grads.size() > i ? grads[i] : Tensor(); };
    std::vector<Tensor> g = native::rnn_layer_backward(mode_, *steps_, x, w_ih, w_hh, saved_, at(0), at(1), at(2), needs);
    return TensorList(g.begin(), g.end());
  }
  void drop() override {
    x_.reset();
    for (auto& w : w_ih_) w.reset();
    for (auto& w : w_hh_) w.reset();
    saved_.clear();
  }
};

// Inputs: (data, h0, c0, weights...); outputs: (output, h_n[, c_n]).
class CudnnRnnNode final : public FunctionNode {
 public:
  explicit CudnnRnnNode(const native::CudnnRnnConfig& config) : FunctionNode("CudnnRnnBackward0"), config_(config) {}

  native::CudnnRnnConfig config_;
  SavedVariable x_, h0_, c0_;
  std::vector<SavedVariable> weights_;
  Tensor y_;  // the forward output without history (cuDNN's backward reads it)
  native::CudnnRnnSaved saved_;

 protected:
  TensorList call(TensorList& grads) override {
    const char* op = "CudnnRnnBackward0";
    const Tensor x = x_.unpack(op);
    const Tensor h0 = h0_.defined() ? h0_.unpack(op) : Tensor();
    const Tensor c0 = c0_.defined() ? c0_.unpack(op) : Tensor();
    std::vector<Tensor> w;
    for (const auto& sv : weights_) w.push_back(sv.unpack(op));
    auto at = [&](size_t i) { return grads.size() > i ? grads[i] : Tensor(); };
    bool need_weights = false;
    for (size_t i = 3; i < next_edges_.size(); ++i) need_weights = need_weights || needs_input_grad(i);
    native::CudnnRnnGrads g =
        native::cudnn_rnn_backward(config_, saved_, x, h0, c0, w, y_, at(0), at(1), at(2), need_weights);
    TensorList out(next_edges_.size());
    if (needs_input_grad(0)) out[0] = g.d_input;
    if (needs_input_grad(1)) out[1] = g.d_h0;
    if (needs_input_grad(2)) out[2] = g.d_c0;
    for (size_t i = 0; i < g.d_weights.size() && 3 + i < out.size(); ++i) {
      if (needs_input_grad(3 + i)) out[3 + i] = g.d_weights[i];
    }
    return out;
  }
  void drop() override {
    x_.reset();
    h0_.reset();
    c0_.reset();
    for (auto& w : weights_) w.reset();
    y_ = Tensor();
    saved_ = native::CudnnRnnSaved{};
  }
};

RnnOutputs cudnn_rnn(const native::CudnnRnnConfig& config, const Tensor& data, const PackedSteps& steps,
                     const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights) {
  std::vector<const Tensor*> inputs{&data, &h0, &c0};
  for (const Tensor& w : weights) inputs.push_back(&w);
  const bool needs_grad = any_input_requires_grad(inputs);
  native::CudnnRnnForward f = native::cudnn_rnn_forward(config, data, steps, h0, c0, weights, needs_grad);
  RnnOutputs out{f.output, f.h_n, f.c_n};
  if (!needs_grad) return out;
  auto node = std::make_shared<CudnnRnnNode>(config);
  node->x_ = SavedVariable(data);
  if (h0.defined()) node->h0_ = SavedVariable(h0);
  if (c0.defined()) node->c0_ = SavedVariable(c0);
  for (const Tensor& w : weights) node->weights_.emplace_back(w);
  node->y_ = native::view(out.output, out.output.sizes());  // a second handle: no history, so no cycle
  node->saved_ = std::move(f.saved);
  std::vector<Tensor*> outputs{&out.output, &out.h_n};
  if (config.mode == RnnMode::kLstm) outputs.push_back(&out.c_n);
  set_history(node, inputs, outputs);
  return out;
}

Tensor inter_layer_dropout(const Tensor& x, double p) {
  if (p >= 1.0) return mul(x, 0.0);
  Tensor mask = bernoulli(x.sizes(), 1.0 - p, TensorOptions(x.dtype()).device(x.device()));
  native::mul_(mask, 1.0 / (1.0 - p));
  return mul(x, mask);
}

}  // namespace

RnnOutputs rnn_layer(RnnMode mode, const Tensor& input, const std::shared_ptr<const PackedSteps>& steps,
                     const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights) {
  std::vector<const Tensor*> inputs{&input, &h0, &c0};
  for (const auto& w : weights) inputs.push_back(&w);
  const bool needs_grad = any_input_requires_grad(inputs);
  native::RnnLayerForward f = native::rnn_layer_forward(mode, input, *steps, h0, c0, weights);
  RnnOutputs out{f.output, f.h_n, f.c_n};
  if (!needs_grad) return out;

  auto node = std::make_shared<RnnLayerNode>(mode, steps);
  node->x_ = SavedVariable(native::contiguous(input));
  for (size_t d = 0; d < weights.size() / 4; ++d) {
    node->w_ih_.emplace_back(weights[4 * d]);
    node->w_hh_.emplace_back(weights[4 * d + 1]);
  }
  node->saved_ = std::move(f.saved);
  std::vector<Tensor*> outputs{&out.output, &out.h_n};
  if (mode == RnnMode::kLstm) outputs.push_back(&out.c_n);
  set_history(node, inputs, outputs);
  return out;
}

RnnOutputs rnn(const native::CudnnRnnConfig& c, const Tensor& data, const std::shared_ptr<const PackedSteps>& steps,
               const Tensor& h0_in, const Tensor& c0_in, const std::vector<Tensor>& weights) {
  const int64_t D = c.bidirectional ? 2 : 1, L = c.num_layers, H = c.hidden_size, B = steps->batch_sizes[0];
  const bool lstm = c.mode == RnnMode::kLstm;
  const TensorOptions opts = TensorOptions(data.dtype()).device(data.device());
  const Tensor h0 = h0_in.defined() ? h0_in : zeros({L * D, B, H}, opts);
  const Tensor c0 = !lstm || c0_in.defined() ? c0_in : zeros({L * D, B, H}, opts);
  if (native::cudnn_rnn_usable(c, data)) return cudnn_rnn(c, data, *steps, h0, c0, weights);
  Tensor x = data;
  std::vector<Tensor> hs, cs;
  for (int64_t l = 0; l < L; ++l) {
    // The layer wants {w_ih, w_hh, b_ih, b_hh} per direction; without bias only the weights are registered.
    std::vector<Tensor> w;
    for (int64_t d = 0; d < D; ++d) {
      const size_t per = c.bias ? 4 : 2, base = static_cast<size_t>(l * D + d) * per;
      w.push_back(weights[base]);
      w.push_back(weights[base + 1]);
      w.push_back(c.bias ? weights[base + 2] : Tensor());
      w.push_back(c.bias ? weights[base + 3] : Tensor());
    }
    const Tensor h0_l = L == 1 ? h0 : narrow(h0, 0, l * D, D);
    const Tensor c0_l = lstm ? (L == 1 ? c0 : narrow(c0, 0, l * D, D)) : Tensor();
    RnnOutputs r = rnn_layer(c.mode, x, steps, h0_l, c0_l, w);
    x = r.output;
    if (c.training && c.dropout > 0 && l + 1 < L) x = inter_layer_dropout(x, c.dropout);
    hs.push_back(r.h_n);
    if (lstm) cs.push_back(r.c_n);
  }
  const Tensor h_n = L == 1 ? hs[0] : cat(hs, 0);
  const Tensor c_n = lstm ? (L == 1 ? cs[0] : cat(cs, 0)) : Tensor();
  return {x, h_n, c_n};
}

}  // namespace ember::autograd::functions
