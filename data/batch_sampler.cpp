#include "data/batch_sampler.h"

#include "core/error.h"

namespace ember::data {

BatchSampler::BatchSampler(std::shared_ptr<Sampler> sampler, size_t batch_size, bool drop_last)
    : sampler_(std::move(sampler)), batch_size_(batch_size), drop_last_(drop_last) {
  EMBER_CHECK_T(ValueError, sampler_ != nullptr, "BatchSampler: sampler must not be null");
  EMBER_CHECK_T(ValueError, batch_size_ > 0,
                "BatchSampler: batch_size should be a positive integer value, but got batch_size=0");
}

std::vector<std::vector<size_t>> BatchSampler::batches() {
  EMBER_CHECK(sampler_ != nullptr, "BatchSampler: a subclass built without a sampler must override batches()");
  std::vector<size_t> idx = sampler_->indices();
  std::vector<std::vector<size_t>> out;
  out.reserve(idx.size() / batch_size_ + 1);
  for (size_t start = 0; start < idx.size(); start += batch_size_) {
    size_t end = std::min(idx.size(), start + batch_size_);
    if (end - start < batch_size_ && drop_last_) break;
    out.emplace_back(idx.begin() + start, idx.begin() + end);
  }
  return out;
}

size_t BatchSampler::size() const {
  EMBER_CHECK(sampler_ != nullptr, "BatchSampler: a subclass built without a sampler must override size()");
  size_t n = sampler_->size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

}  // namespace ember::data
