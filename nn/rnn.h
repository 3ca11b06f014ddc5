// RNN, LSTM, GRU: multi-layer (optionally bidirectional) recurrent layers with PyTorch's
// parameters (weight_ih_l{k}[_reverse] [G*H, in], weight_hh_l{k}[_reverse] [G*H, H],
// bias_ih_..., bias_hh_...; gate order LSTM i,f,g,o and GRU r,z,n), default init
// U(-1/sqrt(H), 1/sqrt(H)), and semantics (nn.RNN / nn.LSTM / nn.GRU), taking a padded Tensor or
// a PackedSequence. The parameters are views of one flat buffer (Note [RNN flat weights] in
// core/ops/rnn_flat_weights.cpp). The module checks its input and states; the stack runs as
// the autograd function of autograd/functions/rnn.h (one cuDNN node on CUDA with cuDNN, else
// one node per layer over the CPU or CUDA kernels). Not thread-safe (a Module); clones may run
// concurrently.
#pragma once
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/ops/nn_native.h"
#include "nn/module.h"
#include "nn/module_holder.h"
#include "nn/utils/rnn.h"

namespace ember::nn {

using utils::rnn::PackedSequence;

/// Options shared by RNN, LSTM and GRU (builder style: LSTMOptions(32, 256).num_layers(2)).
template <class Self>
struct RNNOptionsCommon {
  RNNOptionsCommon(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  Self& num_layers(int64_t v) { num_layers_ = v; return self(); }
  Self& bias(bool v) { bias_ = v; return self(); }
  /// Input and output are [B, T, F] instead of [T, B, F] (states stay [L*D, B, H]).
  Self& batch_first(bool v) { batch_first_ = v; return self(); }
  /// Dropout probability on the outputs of every layer but the last, while training.
  Self& dropout(double v) { dropout_ = v; return self(); }
  Self& bidirectional(bool v) { bidirectional_ = v; return self(); }

  int64_t input_size_;
  int64_t hidden_size_;
  int64_t num_layers_ = 1;
  bool bias_ = true;
  bool batch_first_ = false;
  double dropout_ = 0.0;
  bool bidirectional_ = false;

 private:
  Self& self() { return static_cast<Self&>(*this); }
};

struct LSTMOptions : RNNOptionsCommon<LSTMOptions> {
  using RNNOptionsCommon::RNNOptionsCommon;
};
struct GRUOptions : RNNOptionsCommon<GRUOptions> {
  using RNNOptionsCommon::RNNOptionsCommon;
};
struct RNNOptions : RNNOptionsCommon<RNNOptions> {
  using RNNOptionsCommon::RNNOptionsCommon;
  /// "tanh" (default) or "relu"; anything else throws ValueError when the module is built.
  RNNOptions& nonlinearity(std::string v) { nonlinearity_ = std::move(v); return *this; }
  std::string nonlinearity_ = "tanh";
};

namespace detail {
using native::gate_count;
using native::RnnMode;
inline const char* mode_name(RnnMode m) { return native::rnn_mode_name(m); }

/// What an RNNBase was built with: the stack's configuration (its `training` is set per call)
/// and the module's own batch_first.
struct RnnConfig : native::CudnnRnnConfig {
  bool batch_first = false;
  int64_t num_directions() const { return bidirectional ? 2 : 1; }
};
/// Throws ValueError for non-positive sizes or layers, dropout outside [0, 1].
void rnn_check_config(const RnnConfig& c);
/// Registers the parameters of `c` on `m` in PyTorch's order, as views of one new buffer (flat:
/// Note [RNN flat weights]); initializes them (see rnn_reset_parameters) unless a SkipInitGuard
/// is active.
void rnn_register_parameters(Module& m, const RnnConfig& c);
void rnn_reset_parameters(Module& m, const RnnConfig& c);
/// Copies the parameters of `m` (in registration order) into one new buffer and makes each a
/// view of it (Note [RNN flat weights]); a no-op when they already are, or have none.
void rnn_flatten_parameters(std::vector<std::pair<std::string, Tensor>>& params);
/// Padded input with optional (undefined) h0/c0 -> (output, h_n, c_n).
std::tuple<Tensor, Tensor, Tensor> rnn_forward_padded(const RnnConfig& c, const std::vector<Tensor>& weights,
                                                      bool training, const Tensor& input, const Tensor& h0,
                                                      const Tensor& c0);
/// Packed input -> (packed output, h_n, c_n) with states in the caller's batch order.
std::tuple<PackedSequence, Tensor, Tensor> rnn_forward_packed(const RnnConfig& c, const std::vector<Tensor>& weights,
                                                              bool training, const PackedSequence& input,
                                                              const Tensor& h0, const Tensor& c0);
void rnn_pretty_print(std::ostream& os, const char* name, const RnnConfig& c);
}  // namespace detail

/// The common state and algorithm of RNN, LSTM and GRU, which add their typed forward
/// overloads. Hidden states are [num_layers * num_directions, B, H] (2-D [L*D, H] for
/// unbatched 2-D input), layer-major: index l * D + d.
template <class Derived>
class RNNBase : public Cloneable<Derived> {
 public:
  using Mode = detail::RnnMode;

  void reset() override { detail::rnn_register_parameters(*this, config_); }  // flat already
  /// Makes every parameter a view of one flat buffer again (PyTorch's flatten_parameters; see
  /// Note [RNN flat weights]). The module calls it itself after to() and clone() (also as a
  /// child of a cloned module); call it after
  /// replacing a parameter's data by hand to get the in-place cuDNN weights back.
  void flatten_parameters() { detail::rnn_flatten_parameters(this->parameters_); }
  void to(Device device) override {
    Module::to(device);
    flatten_parameters();
  }
  void to(DType dtype) override {
    Module::to(dtype);
    flatten_parameters();
  }
  using Module::to;
  /// clone() (its own, or a parent's) copies values parameter by parameter: flatten again.
  void copy_values_from(const Module& other, std::optional<Device> device) override {
    Module::copy_values_from(other, device);
    // Parameters given by a clone source (CloneParameterSourceGuard: DataParallel's CPU aliases of
    // the flat original, its broadcast copies) are kept as given.
    if (detail::CloneParameterSourceGuard::current() == nullptr) flatten_parameters();
  }


  /// Re-draws every parameter from U(-1/sqrt(H), 1/sqrt(H)); does nothing under SkipInitGuard.
  void reset_parameters() { detail::rnn_reset_parameters(*this, config_); }
  /// The parameters in PyTorch's _flat_weights order (w_ih, w_hh, b_ih, b_hh per layer and direction).
  std::vector<Tensor> flat_weights() const {
    std::vector<Tensor> out;
    for (const auto& p : this->parameters_) out.push_back(p.second);
    return out;
  }
  void pretty_print(std::ostream& os) const override { detail::rnn_pretty_print(os, this->name_.c_str(), config_); }

  int64_t input_size() const { return config_.input_size; }
  int64_t hidden_size() const { return config_.hidden_size; }
  int64_t num_layers() const { return config_.num_layers; }
  bool bias() const { return config_.bias; }
  bool batch_first() const { return config_.batch_first; }
  double dropout() const { return config_.dropout; }
  bool bidirectional() const { return config_.bidirectional; }
  Mode mode() const { return config_.mode; }
  const detail::RnnConfig& config() const { return config_; }

 protected:
  template <class Opts>
  RNNBase(const char* name, Mode mode, const Opts& o) : Cloneable<Derived>(name) {
    config_.mode = mode;
    config_.input_size = o.input_size_;
    config_.hidden_size = o.hidden_size_;
    config_.num_layers = o.num_layers_;
    config_.bias = o.bias_;
    config_.batch_first = o.batch_first_;
    config_.dropout = o.dropout_;
    config_.bidirectional = o.bidirectional_;
    detail::rnn_check_config(config_);
    reset();
  }
  std::tuple<Tensor, Tensor, Tensor> run(const Tensor& input, const Tensor& h0, const Tensor& c0) {
    return detail::rnn_forward_padded(config_, flat_weights(), this->is_training(), input, h0, c0);
  }
  std::tuple<PackedSequence, Tensor, Tensor> run(const PackedSequence& input, const Tensor& h0, const Tensor& c0) {
    return detail::rnn_forward_packed(config_, flat_weights(), this->is_training(), input, h0, c0);
  }
  /// RNN's and GRU's forward: (output, h_n) for a Tensor or PackedSequence input.
  template <class Input>
  std::tuple<Input, Tensor> run_hidden(const Input& input, const Tensor& hx) {
    auto [y, h, c] = run(input, hx, Tensor());
    return {y, h};
  }
  /// LSTM's forward: (output, (h_n, c_n)); hx holds both states or is empty.
  template <class Input>
  std::tuple<Input, std::tuple<Tensor, Tensor>> run_lstm(const Input& input,
                                                         const std::optional<std::tuple<Tensor, Tensor>>& hx) {
    auto [y, h, c] = hx ? run(input, std::get<0>(*hx), std::get<1>(*hx)) : run(input, Tensor(), Tensor());
    return {y, {h, c}};
  }

  detail::RnnConfig config_;
};

/// Elman RNN: h' = act(W_ih x + b_ih + W_hh h + b_hh), act = tanh or relu.
class RNNImpl : public RNNBase<RNNImpl> {
 public:
  RNNImpl(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1)
      : RNNImpl(RNNOptions(input_size, hidden_size).num_layers(num_layers)) {}
  /// Throws ValueError for an unknown nonlinearity (and see detail::rnn_check_config).
  explicit RNNImpl(const RNNOptions& options);

  /// input [T, B, F] ([B, T, F] with batch_first; [T, F] unbatched), hx [L*D, B, H] or undefined
  /// (zeros). Returns (output [T, B, D*H], h_n [L*D, B, H]).
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = Tensor());
  /// Returns (output as a PackedSequence like input, h_n in the caller's batch order).
  std::tuple<PackedSequence, Tensor> forward(const PackedSequence& input, const Tensor& hx = Tensor());
};
/// LibTorch's module holder of RNNImpl (nn/module_holder.h).
EMBER_MODULE(RNN);

/// LSTM (no projections): gates i, f, g, o; c' = f*c + i*g; h' = o*tanh(c').
class LSTMImpl : public RNNBase<LSTMImpl> {
 public:
  LSTMImpl(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1)
      : LSTMImpl(LSTMOptions(input_size, hidden_size).num_layers(num_layers)) {}
  explicit LSTMImpl(const LSTMOptions& options) : RNNBase("LSTM", Mode::kLstm, options) {}

  using State = std::tuple<Tensor, Tensor>;  // (h, c), each [L*D, B, H]
  /// Returns (output, (h_n, c_n)); see RNN::forward for shapes. hx: both or neither.
  std::tuple<Tensor, State> forward(const Tensor& input, const std::optional<State>& hx = std::nullopt);
  std::tuple<PackedSequence, State> forward(const PackedSequence& input, const std::optional<State>& hx = std::nullopt);
};
/// LibTorch's module holder of LSTMImpl (nn/module_holder.h).
EMBER_MODULE(LSTM);

/// GRU: r = sigmoid(W_ir x + b_ir + W_hr h + b_hr), z likewise,
/// n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h.
class GRUImpl : public RNNBase<GRUImpl> {
 public:
  GRUImpl(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1)
      : GRUImpl(GRUOptions(input_size, hidden_size).num_layers(num_layers)) {}
  explicit GRUImpl(const GRUOptions& options) : RNNBase("GRU", Mode::kGru, options) {}

  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = Tensor());
  std::tuple<PackedSequence, Tensor> forward(const PackedSequence& input, const Tensor& hx = Tensor());
};
/// LibTorch's module holder of GRUImpl (nn/module_holder.h).
EMBER_MODULE(GRU);

}  // namespace ember::nn
