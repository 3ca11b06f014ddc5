#include "nn/detail/cudnn_rnn.h"

#include <string>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/ops/native.h"

namespace ember::nn::detail {
namespace {

// Inputs: (data, h0, c0, weights...); outputs: (output, h_n, c_n).
class CudnnRnnNode final : public autograd::Node {
 public:
  explicit CudnnRnnNode(const native::CudnnRnnConfig& config) : config_(config) {}

  std::string name() const override { return "CudnnRnnBackward0"; }
  void release_variables() override {
    released_ = true;
    x_.reset();
    h0_.reset();
    c0_.reset();
    for (auto& w : weights_) w.reset();
    y_ = Tensor();
    saved_ = native::CudnnRnnSaved{};
  }

  autograd::TensorList apply(autograd::TensorList&& grads) override {
    const char* op = "CudnnRnnBackward0";
    EMBER_CHECK(!released_, op, ": trying to backward through the graph a second time (or directly access saved "
                "tensors after they have already been freed). Saved intermediate values of the graph are freed when "
                "you call backward(). Specify retain_graph=true if you need to backward through the graph a second time.");
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
    autograd::TensorList out(next_edges_.size());
    if (needs_input_grad(0)) out[0] = g.d_input;
    if (needs_input_grad(1)) out[1] = g.d_h0;
    if (needs_input_grad(2)) out[2] = g.d_c0;
    for (size_t i = 0; i < g.d_weights.size() && 3 + i < out.size(); ++i) {
      if (needs_input_grad(3 + i)) out[3 + i] = g.d_weights[i];
    }
    return out;
  }

  native::CudnnRnnConfig config_;
  autograd::SavedVariable x_, h0_, c0_;
  std::vector<autograd::SavedVariable> weights_;
  Tensor y_;  // the forward output without history (cuDNN's backward reads it)
  native::CudnnRnnSaved saved_;

 private:
  bool released_ = false;
};

}  // namespace

std::tuple<Tensor, Tensor, Tensor> cudnn_rnn(const native::CudnnRnnConfig& config, const Tensor& data,
                                             const std::shared_ptr<const native::PackedSteps>& steps,
                                             const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights) {
  std::vector<const Tensor*> inputs{&data, &h0, &c0};
  for (const Tensor& w : weights) inputs.push_back(&w);
  bool needs_grad = false;
  if (autograd::GradMode::is_enabled()) {
    for (const Tensor* t : inputs) needs_grad = needs_grad || (t->defined() && t->requires_grad());
  }
  native::CudnnRnnForward f = native::cudnn_rnn_forward(config, data, *steps, h0, c0, weights, needs_grad);
  Tensor y = f.output, h_n = f.h_n, c_n = f.c_n;
  if (!needs_grad) return {y, h_n, c_n};
  auto node = std::make_shared<CudnnRnnNode>(config);
  node->x_ = autograd::SavedVariable(data);
  if (h0.defined()) node->h0_ = autograd::SavedVariable(h0);
  if (c0.defined()) node->c0_ = autograd::SavedVariable(c0);
  for (const Tensor& w : weights) node->weights_.emplace_back(w);
  node->y_ = native::view(y, y.sizes());  // a second handle: no history, so no cycle through the node
  node->saved_ = std::move(f.saved);
  std::vector<Tensor*> outputs{&y, &h_n};
  if (config.mode == native::RnnMode::kLstm) outputs.push_back(&c_n);
  autograd::set_history(node, inputs, outputs);
  return {y, h_n, c_n};
}

}  // namespace ember::nn::detail
