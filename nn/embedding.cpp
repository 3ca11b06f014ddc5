#include "nn/embedding.h"

#include "core/ops/native.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace ember::nn {

EmbeddingImpl::EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx)
    : Cloneable("Embedding"), num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
  EMBER_CHECK_T(ValueError, num_embeddings >= 0 && embedding_dim >= 0,
                "Embedding: num_embeddings and embedding_dim must be non-negative, got ", num_embeddings, " and ",
                embedding_dim);
  if (padding_idx) {
    int64_t p = *padding_idx;
    EMBER_CHECK_T(ValueError, p < num_embeddings && p >= -num_embeddings,
                  "Embedding: Padding_idx must be within num_embeddings (got ", p, " for ", num_embeddings,
                  " embeddings)");
    padding_idx_ = p < 0 ? p + num_embeddings : p;
  }
  reset();
}

std::shared_ptr<EmbeddingImpl> EmbeddingImpl::from_pretrained(const Tensor& embeddings, bool freeze,
                                                      std::optional<int64_t> padding_idx) {
  EMBER_CHECK_T(ValueError, embeddings.dim() == 2, "Embeddings parameter is expected to be 2-dimensional, got shape ",
                embeddings.sizes());
  std::shared_ptr<EmbeddingImpl> e;
  {
    detail::SkipInitGuard skip;
    e = std::make_shared<EmbeddingImpl>(embeddings.sizes()[0], embeddings.sizes()[1], padding_idx);
  }
  NoGradGuard no_grad;
  native::copy_(e->weight, embeddings);
  if (freeze) e->weight.requires_grad_(false);
  return e;
}

void EmbeddingImpl::reset() {
  weight = register_parameter("weight", empty({num_embeddings_, embedding_dim_}));
  reset_parameters();
}

void EmbeddingImpl::reset_parameters() {
  init::normal_(weight);
  if (padding_idx_ && !detail::SkipInitGuard::active()) {
    NoGradGuard no_grad;
    Tensor row = native::select(weight, 0, *padding_idx_);
    native::zero_(row);
  }
}

Tensor EmbeddingImpl::forward(const Tensor& indices) { return F::embedding(indices, weight, padding_idx_); }

void EmbeddingImpl::pretty_print(std::ostream& os) const {
  os << "Embedding(" << num_embeddings_ << ", " << embedding_dim_;
  if (padding_idx_) os << ", padding_idx=" << *padding_idx_;
  os << ")";
}

}  // namespace ember::nn
