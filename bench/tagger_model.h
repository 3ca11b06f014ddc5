// The model that ember-bench-dp and ember-bench-ddp train (the same layers as ember-bench-lstm's):
// Embedding(64, 32) -> 2-layer batch-first LSTM(32, 256) over packed sequences ->
// pad_packed_sequence(total_length=50) -> Linear(256, 64), as a Cloneable Module so DataParallel
// and DistributedDataParallel can wrap it. Plus the process CPU clock both benches report.
#pragma once
#include <time.h>

#include <memory>
#include <tuple>

#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/rnn.h"
#include "nn/utils/rnn.h"

namespace ember::bench {

constexpr int64_t kVocab = 64;
constexpr int64_t kEmbed = 32;
constexpr int64_t kHidden = 256;
constexpr int64_t kLayers = 2;
constexpr int64_t kMaxLen = 50;

class TaggerModel : public nn::Cloneable<TaggerModel> {
 public:
  TaggerModel() : nn::Cloneable<TaggerModel>("TaggerModel") { reset(); }
  void reset() override {
    embedding = register_module("embedding", std::make_shared<nn::EmbeddingImpl>(kVocab, kEmbed));
    lstm = register_module(
        "lstm", std::make_shared<nn::LSTMImpl>(nn::LSTMOptions(kEmbed, kHidden).num_layers(kLayers).batch_first(true)));
    head = register_module("head", std::make_shared<nn::LinearImpl>(kHidden, kVocab));
  }
  /// tokens [B, T] int64, lengths [B] int64 -> logits [B, kMaxLen, kVocab].
  Tensor forward(const Tensor& tokens, const Tensor& lengths) {
    namespace rnn = nn::utils::rnn;
    Tensor x = embedding->forward(tokens);
    auto packed = rnn::pack_padded_sequence(x, lengths, /*batch_first=*/true, /*enforce_sorted=*/false);
    auto out = std::get<0>(lstm->forward(packed));
    Tensor padded = rnn::pad_packed_sequence(out, /*batch_first=*/true, 0.0, kMaxLen).first;
    return head->forward(padded);
  }
  std::shared_ptr<nn::EmbeddingImpl> embedding;
  std::shared_ptr<nn::LSTMImpl> lstm;
  std::shared_ptr<nn::LinearImpl> head;
};

/// CPU time of the whole process (all threads), in milliseconds.
inline double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

}  // namespace ember::bench
