// RNNModel of examples/word_lm, PyTorch's word_language_model: Embedding(ntoken, ninp) ->
// Dropout -> LSTM(ninp, nhid, nlayers, dropout between layers) -> Dropout -> Linear(nhid,
// ntoken). With tied weights the decoder's weight slot holds the embedding's weight (one
// parameter: see Note [Shared parameters] in nn/module.cpp). A Module: not thread-safe.
#pragma once
#include <cstdint>
#include <memory>
#include <tuple>

#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/rnn.h"

namespace word_lm {

struct ModelConfig {
  int64_t ntoken = 10000;
  int64_t ninp = 200;
  int64_t nhid = 200;
  int64_t nlayers = 2;
  double dropout = 0.2;
  bool tied = false;
};

class RNNModel : public ember::nn::Cloneable<RNNModel> {
 public:
  using State = ember::nn::LSTMImpl::State;  // (h, c), each [nlayers, B, nhid]

  /// Throws ValueError when tied and nhid != ninp (the decoder's weight is the embedding's).
  explicit RNNModel(const ModelConfig& config = {});
  void reset() override;
  /// input int64 [T, B] -> (logits [T * B, ntoken], the state after the last step).
  std::tuple<ember::Tensor, State> forward(const ember::Tensor& input, const State& hidden);
  /// Zeros for a batch of `batch` streams.
  State init_hidden(int64_t batch) const;
  void pretty_print(std::ostream& os) const override;
  const ModelConfig& config() const { return config_; }

  std::shared_ptr<ember::nn::EmbeddingImpl> encoder;
  std::shared_ptr<ember::nn::DropoutImpl> drop;
  std::shared_ptr<ember::nn::LSTMImpl> rnn;
  std::shared_ptr<ember::nn::LinearImpl> decoder;

 private:
  ModelConfig config_;
};

/// The FAQ's repackage_hidden: the same values with no history, so backward of the next chunk
/// stops here and the previous chunk's graph can be freed.
RNNModel::State repackage_hidden(const RNNModel::State& hidden);

}  // namespace word_lm
