// The model of examples/rnn_dp, the PyTorch FAQ's MyModule: Embedding(257, 32, padding_idx 0)
// -> LSTM(32, 128) over pack_padded_sequence(enforce_sorted=false) -> pad_packed_sequence
// (total_length = the padded length) -> mean over the valid positions -> Linear(128, 6).
// WordEncoder is the part DataParallel runs (forward(padded, lengths), scattered on the batch
// dims); it returns the padded LSTM output, which is what makes the FAQ's total_length matter.
// WordLangModel owns the encoder and the classifier head. Modules: not thread-safe; clones may
// run concurrently.
#pragma once
#include <cstdint>
#include <memory>

#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/rnn.h"

namespace rnn_dp {

struct ModelConfig {
  int64_t vocab_size = 257;
  int64_t embedding_dim = 32;
  int64_t hidden_size = 128;
  int64_t num_classes = 6;
  bool batch_first = true;
  /// Unpack with total_length = the padded input's length (the FAQ's fix). false reproduces the
  /// FAQ's failure: replicas of one batch return outputs of different lengths.
  bool total_length = true;
};

class WordEncoder : public ember::nn::Cloneable<WordEncoder> {
 public:
  explicit WordEncoder(const ModelConfig& config = {});
  void reset() override;
  /// padded int64 [B, T] (batch_first) or [T, B], 0-padded; lengths int64 [B], each in [1, T].
  /// Returns the LSTM output, padded with zeros: [B, T, H] or [T, B, H] (T' = the longest
  /// length instead of T when built without total_length).
  ember::Tensor forward(const ember::Tensor& padded, const ember::Tensor& lengths);
  void pretty_print(std::ostream& os) const override;

  const ModelConfig& config() const { return config_; }

  std::shared_ptr<ember::nn::EmbeddingImpl> embedding;
  std::shared_ptr<ember::nn::LSTMImpl> lstm;

 private:
  ModelConfig config_;
};

class WordLangModel : public ember::nn::Cloneable<WordLangModel> {
 public:
  explicit WordLangModel(const ModelConfig& config = {});
  void reset() override;
  /// Logits [B, num_classes] from the encoder's output and the lengths: the mean over valid
  /// positions (padding rows are zeros, so their sum divided by the length), then the classifier.
  /// `keep`: an undefined tensor, or a dropout mask [B, H] (0 or 1/(1-p)) multiplied into the
  /// pooled features in training.
  ember::Tensor classify(const ember::Tensor& encoded, const ember::Tensor& lengths, const ember::Tensor& keep = {});
  /// classify(encoder->forward(padded, lengths), lengths, keep): the whole model on one device.
  ember::Tensor forward(const ember::Tensor& padded, const ember::Tensor& lengths, const ember::Tensor& keep = {});
  void pretty_print(std::ostream& os) const override;

  const ModelConfig& config() const { return config_; }

  std::shared_ptr<WordEncoder> encoder;
  std::shared_ptr<ember::nn::LinearImpl> classifier;

 private:
  ModelConfig config_;
};

}  // namespace rnn_dp
