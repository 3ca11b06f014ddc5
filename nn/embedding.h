// Embedding: a lookup table, PyTorch's nn.Embedding (parameter "weight" [num_embeddings,
// embedding_dim] drawn from N(0, 1); the padding_idx row is zeroed and never receives a
// gradient). Not thread-safe (a Module); clones may run concurrently.
#pragma once
#include <optional>

#include "nn/module.h"
#include "nn/module_holder.h"

namespace ember::nn {

class EmbeddingImpl : public Cloneable<EmbeddingImpl> {
 public:
  /// padding_idx may be negative (counts from the end). Throws ValueError when it is outside
  /// [-num_embeddings, num_embeddings) or a size is negative.
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt);
  /// Wraps an existing table (torch.nn.Embedding.from_pretrained); freeze: no gradient.
  static std::shared_ptr<EmbeddingImpl> from_pretrained(const Tensor& embeddings, bool freeze = true,
                                                    std::optional<int64_t> padding_idx = std::nullopt);

  void reset() override;
  void reset_parameters();
  /// Integer indices of any shape -> [*indices, embedding_dim]. IndexError when out of range.
  Tensor forward(const Tensor& indices);
  void pretty_print(std::ostream& os) const override;

  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return embedding_dim_; }
  /// Normalized to [0, num_embeddings).
  std::optional<int64_t> padding_idx() const { return padding_idx_; }

  Tensor weight;

 private:
  int64_t num_embeddings_;
  int64_t embedding_dim_;
  std::optional<int64_t> padding_idx_;
};
/// LibTorch's module holder of EmbeddingImpl (nn/module_holder.h).
EMBER_MODULE(Embedding);

}  // namespace ember::nn
