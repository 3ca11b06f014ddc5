// The FAQ's training model as free-standing modules: Embedding -> pack_padded_sequence
// (batch_first, enforce_sorted=false) -> LSTM -> pad_packed_sequence(total_length = the padded
// length) -> Linear -> cross_entropy over the valid positions (ignore_index -100) -> one
// optimizer step. Shared by tests/nn/cuda_model_test.cpp and bench/bench_lstm.cpp, so it needs
// no GoogleTest. Header-only; a model is not thread-safe.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "autograd/ops.h"
#include "core/ops/factory.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/optim/optimizer.h"
#include "nn/rnn.h"
#include "nn/utils/rnn.h"

namespace ember::test_support {

/// Targets beyond each sequence's length become -100 (ignored by the loss). `targets` is [B * T]
/// row-major (batch first); returns it as an int64 tensor [B * T].
inline Tensor ignore_past_lengths(std::vector<int64_t> targets, const std::vector<int64_t>& lengths, int64_t steps) {
  for (size_t b = 0; b < lengths.size(); ++b) {
    for (int64_t t = lengths[b]; t < steps; ++t) targets[b * static_cast<size_t>(steps) + static_cast<size_t>(t)] = -100;
  }
  return from_vector<int64_t>(targets, {static_cast<int64_t>(targets.size())});
}

struct FaqModel {
  /// Embedding(vocab, embed, padding_idx) -> LSTM(embed, hidden, num_layers, dropout between
  /// layers, batch_first) -> Linear(hidden, vocab), initialized in that order from the default
  /// generator.
  FaqModel(int64_t vocab, int64_t embed, int64_t hidden, int64_t num_layers, double dropout = 0.0,
           std::optional<int64_t> padding_idx = std::nullopt)
      : emb(std::make_shared<nn::EmbeddingImpl>(vocab, embed, padding_idx)),
        lstm(std::make_shared<nn::LSTMImpl>(
            nn::LSTMOptions(embed, hidden).num_layers(num_layers).dropout(dropout).batch_first(true))),
        lin(std::make_shared<nn::LinearImpl>(hidden, vocab)),
        vocab(vocab) {}

  std::vector<Tensor> parameters() const {
    std::vector<Tensor> out;
    for (auto* m : modules()) {
      for (const Tensor& p : m->parameters()) out.push_back(p);
    }
    return out;
  }
  void to(Device d) {
    for (auto* m : modules()) m->to(d);
  }

  /// One training step on tokens int64 [B, T] with targets int64 [B * T]; `lengths` is what
  /// pack_padded_sequence takes (a std::vector<int64_t> or an int64 CPU tensor [B]). Returns the
  /// loss tensor (on the model's device; reading it is the caller's choice, as it synchronizes).
  template <class Lengths>
  Tensor step(const Tensor& tokens, const Lengths& lengths, const Tensor& targets, optim::Optimizer& opt) {
    opt.zero_grad(/*set_to_none=*/true);
    Tensor loss = forward_backward(tokens, lengths, targets);
    opt.step();
    return loss;
  }

  /// step() without the optimizer: the loss, its gradients accumulated into the parameters'
  /// .grad (the caller clears them first). Tests compare devices here, before an optimizer
  /// amplifies rounding differences of near-zero gradients.
  template <class Lengths>
  Tensor forward_backward(const Tensor& tokens, const Lengths& lengths, const Tensor& targets) {
    Tensor x = emb->forward(tokens);
    auto packed = nn::utils::rnn::pack_padded_sequence(x, lengths, /*batch_first=*/true, /*enforce_sorted=*/false);
    auto [out, state] = lstm->forward(packed);
    auto [y, lens] = nn::utils::rnn::pad_packed_sequence(out, /*batch_first=*/true, 0.0, tokens.size(1));
    Tensor logits = lin->forward(y);
    nn::functional::CrossEntropyOptions ce;
    ce.ignore_index = -100;
    Tensor loss = nn::functional::cross_entropy(reshape(logits, {-1, vocab}), targets, ce);
    loss.backward();
    return loss;
  }

  std::shared_ptr<nn::EmbeddingImpl> emb;
  std::shared_ptr<nn::LSTMImpl> lstm;
  std::shared_ptr<nn::LinearImpl> lin;
  int64_t vocab;

 private:
  std::array<nn::Module*, 3> modules() const { return {emb.get(), lstm.get(), lin.get()}; }
};

}  // namespace ember::test_support
