#include "examples/rnn_dp/model.h"

#include <optional>
#include <ostream>

#include "autograd/ops.h"
#include "nn/utils/rnn.h"

namespace rnn_dp {

using ember::Tensor;
namespace rnn = ember::nn::utils::rnn;

WordEncoder::WordEncoder(const ModelConfig& config) : Cloneable("WordEncoder"), config_(config) { reset(); }

void WordEncoder::reset() {
  embedding = register_module("embedding", std::make_shared<ember::nn::EmbeddingImpl>(
                                               config_.vocab_size, config_.embedding_dim, /*padding_idx=*/0));
  lstm = register_module("lstm", std::make_shared<ember::nn::LSTMImpl>(
                                     ember::nn::LSTMOptions(config_.embedding_dim, config_.hidden_size)
                                         .batch_first(config_.batch_first)));
}

Tensor WordEncoder::forward(const Tensor& padded, const Tensor& lengths) {
  const int64_t time_dim = config_.batch_first ? 1 : 0;
  // pack_padded_sequence wants the lengths on the host (DataParallel may have scattered them to a GPU).
  const Tensor host_lengths = lengths.device().is_cpu() ? lengths : ember::to(lengths, ember::Device::cpu());
  rnn::PackedSequence packed =
      rnn::pack_padded_sequence(embedding->forward(padded), host_lengths, config_.batch_first,
                                /*enforce_sorted=*/false);
  rnn::PackedSequence out = std::get<0>(lstm->forward(packed));
  const std::optional<int64_t> total_length =
      config_.total_length ? std::optional<int64_t>(padded.size(time_dim)) : std::nullopt;
  return rnn::pad_packed_sequence(out, config_.batch_first, /*padding_value=*/0.0, total_length).first;
}

void WordEncoder::pretty_print(std::ostream& os) const {
  os << "WordEncoder(\n  (embedding): ";
  embedding->pretty_print(os);
  os << "\n  (lstm): ";
  lstm->pretty_print(os);
  os << "\n)";
}

WordLangModel::WordLangModel(const ModelConfig& config) : Cloneable("WordLangModel"), config_(config) { reset(); }

void WordLangModel::reset() {
  encoder = register_module("encoder", std::make_shared<WordEncoder>(config_));
  classifier =
      register_module("classifier", std::make_shared<ember::nn::LinearImpl>(config_.hidden_size, config_.num_classes));
}

Tensor WordLangModel::classify(const Tensor& encoded, const Tensor& lengths, const Tensor& keep) {
  const int64_t time_dim = config_.batch_first ? 1 : 0;
  const Tensor summed = ember::sum(encoded, {time_dim});  // [B, H]; padding positions are zeros
  const Tensor denom = ember::unsqueeze(ember::to(lengths, encoded.device(), encoded.dtype()), 1);  // [B, 1]
  const Tensor pooled = summed / denom;
  return classifier->forward(keep.defined() && is_training() ? pooled * keep : pooled);
}

Tensor WordLangModel::forward(const Tensor& padded, const Tensor& lengths, const Tensor& keep) {
  return classify(encoder->forward(padded, lengths), lengths, keep);
}

void WordLangModel::pretty_print(std::ostream& os) const {
  os << "WordLangModel(\n  (encoder): ";
  encoder->pretty_print(os);
  os << "\n  (classifier): ";
  classifier->pretty_print(os);
  os << "\n)";
}

}  // namespace rnn_dp
