// SequentialSampler: 0, 1, ..., n-1 every epoch. Stateless; thread-safe.
#pragma once
#include "data/sampler.h"

namespace ember::data {

class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(size_t size) : size_(size) {}
  std::vector<size_t> indices() override;
  size_t size() const override { return size_; }

 private:
  size_t size_;
};

}  // namespace ember::data
