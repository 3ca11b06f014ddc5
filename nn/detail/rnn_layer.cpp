#include "nn/detail/rnn_layer.h"

#include <string>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/ops/native.h"

namespace ember::nn::detail {
namespace {

class RnnLayerNode final : public autograd::Node {
 public:
  RnnLayerNode(RnnMode mode, std::shared_ptr<const PackedSteps> steps)
      : mode_(mode), steps_(std::move(steps)), name_(std::string(mode_name(mode)) + "LayerBackward0") {}

  std::string name() const override { return name_; }
  void release_variables() override {
    released_ = true;
    x_.reset();
    for (auto& w : w_ih_) w.reset();
    for (auto& w : w_hh_) w.reset();
    saved_.clear();
  }

  autograd::TensorList apply(autograd::TensorList&& grads) override {
    EMBER_CHECK(!released_, name_, ": trying to backward through the graph a second time (or directly access saved "
                "tensors after they have already been freed). Saved intermediate values of the graph are freed when "
                "you call backward(). Specify retain_graph=true if you need to backward through the graph a second time.");
    const char* op = name_.c_str();
    const Tensor x = x_.unpack(op);
    std::vector<Tensor> w_ih, w_hh;
    for (const auto& w : w_ih_) w_ih.push_back(w.unpack(op));
    for (const auto& w : w_hh_) w_hh.push_back(w.unpack(op));
    std::vector<bool> needs(next_edges_.size());
    for (size_t i = 0; i < needs.size(); ++i) needs[i] = needs_input_grad(i);
    auto at = [&](size_t i) { return grads.size() > i ? grads[i] : Tensor(); };
    std::vector<Tensor> g =
        native::rnn_layer_backward(mode_, *steps_, x, w_ih, w_hh, saved_, at(0), at(1), at(2), needs);
    return autograd::TensorList(g.begin(), g.end());
  }

  RnnMode mode_;
  std::shared_ptr<const PackedSteps> steps_;
  autograd::SavedVariable x_;
  std::vector<autograd::SavedVariable> w_ih_, w_hh_;
  std::vector<native::RnnDirectionSaved> saved_;

 private:
  std::string name_;
  bool released_ = false;
};

}  // namespace

RnnLayerOutputs rnn_layer(RnnMode mode, const Tensor& input, const std::shared_ptr<const PackedSteps>& steps,
                          const Tensor& h0, const Tensor& c0, const std::vector<Tensor>& weights) {
  bool needs_grad = false;
  std::vector<const Tensor*> inputs{&input, &h0, &c0};
  for (const auto& w : weights) inputs.push_back(&w);
  if (autograd::GradMode::is_enabled()) {
    for (const Tensor* t : inputs) needs_grad = needs_grad || (t->defined() && t->requires_grad());
  }
  native::RnnLayerForward f = native::rnn_layer_forward(mode, input, *steps, h0, c0, weights);
  RnnLayerOutputs out{f.output, f.h_n, f.c_n};
  if (!needs_grad) return out;

  auto node = std::make_shared<RnnLayerNode>(mode, steps);
  node->x_ = autograd::SavedVariable(native::contiguous(input));
  for (size_t d = 0; d < weights.size() / 4; ++d) {
    node->w_ih_.emplace_back(weights[4 * d]);
    node->w_hh_.emplace_back(weights[4 * d + 1]);
  }
  node->saved_ = std::move(f.saved);
  std::vector<Tensor*> outputs{&out.output, &out.h_n};
  if (mode == RnnMode::kLstm) outputs.push_back(&out.c_n);
  autograd::set_history(node, inputs, outputs);
  return out;
}

}  // namespace ember::nn::detail
