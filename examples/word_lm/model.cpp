#include "examples/word_lm/model.h"

#include "autograd/ops.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "nn/init.h"

namespace word_lm {

RNNModel::RNNModel(const ModelConfig& config) : Cloneable("RNNModel"), config_(config) {
  EMBER_CHECK_T(ember::ValueError, !config_.tied || config_.nhid == config_.ninp,
                "--tied needs --nhid equal to --emsize (the decoder's weight is the embedding's), got nhid ",
                config_.nhid, " and emsize ", config_.ninp);
  reset();
}

void RNNModel::reset() {
  encoder = register_module("encoder", std::make_shared<ember::nn::EmbeddingImpl>(config_.ntoken, config_.ninp));
  drop = register_module("drop", std::make_shared<ember::nn::DropoutImpl>(config_.dropout));
  rnn = register_module("rnn", std::make_shared<ember::nn::LSTMImpl>(ember::nn::LSTMOptions(config_.ninp, config_.nhid)
                                                                     .num_layers(config_.nlayers)
                                                                     .dropout(config_.dropout)));
  decoder = register_module("decoder", std::make_shared<ember::nn::LinearImpl>(config_.nhid, config_.ntoken));
  // PyTorch's example's init_weights: U(-0.1, 0.1) for both matrices, a zero decoder bias.
  ember::nn::init::uniform_(encoder->weight, -0.1, 0.1);
  ember::nn::init::zeros_(decoder->bias);
  ember::nn::init::uniform_(decoder->weight, -0.1, 0.1);
  if (config_.tied) {
    decoder->weight = encoder->weight;
    *decoder->find_parameter("weight") = encoder->weight;
  }
}

std::tuple<ember::Tensor, RNNModel::State> RNNModel::forward(const ember::Tensor& input, const State& hidden) {
  const ember::Tensor emb = drop->forward(encoder->forward(input));
  auto [output, state] = rnn->forward(emb, hidden);
  const ember::Tensor decoded = decoder->forward(drop->forward(output));
  return {ember::reshape(decoded, {-1, config_.ntoken}), state};
}

RNNModel::State RNNModel::init_hidden(int64_t batch) const {
  const ember::Device device = encoder->weight.device();
  const ember::TensorOptions options = ember::TensorOptions(ember::kFloat32).device(device);
  return {ember::zeros({config_.nlayers, batch, config_.nhid}, options),
          ember::zeros({config_.nlayers, batch, config_.nhid}, options)};
}

void RNNModel::pretty_print(std::ostream& os) const {
  os << "RNNModel(ntoken=" << config_.ntoken << ", ninp=" << config_.ninp << ", nhid=" << config_.nhid
     << ", nlayers=" << config_.nlayers << ", dropout=" << config_.dropout << (config_.tied ? ", tied" : "") << ")";
}

RNNModel::State repackage_hidden(const RNNModel::State& hidden) {
  return {ember::detach(std::get<0>(hidden)), ember::detach(std::get<1>(hidden))};
}

}  // namespace word_lm
