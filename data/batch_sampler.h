// BatchSampler: groups a Sampler's indices into batches of batch_size (the last one short
// unless drop_last), as torch.utils.data.BatchSampler. batches() is one epoch. Subclass it and
// override batches()/size() for custom batching (bucketing by length, ...). One thread at a time.
#pragma once
#include <memory>
#include <vector>

#include "data/sampler.h"

namespace ember::data {

class BatchSampler {
 public:
  /// Throws ValueError when sampler is null or batch_size is 0.
  BatchSampler(std::shared_ptr<Sampler> sampler, size_t batch_size, bool drop_last);
  virtual ~BatchSampler() = default;
  /// One epoch of batches of indices.
  virtual std::vector<std::vector<size_t>> batches();
  /// Number of batches per epoch.
  virtual size_t size() const;

  size_t batch_size() const { return batch_size_; }
  bool drop_last() const { return drop_last_; }
  const std::shared_ptr<Sampler>& sampler() const { return sampler_; }

 protected:
  BatchSampler() = default;  // for subclasses that batch on their own

 private:
  std::shared_ptr<Sampler> sampler_;
  size_t batch_size_ = 1;
  bool drop_last_ = false;
};

}  // namespace ember::data
