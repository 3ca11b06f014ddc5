// DistributedSampler: the share of a dataset's indices that replica `rank` of `num_replicas`
// visits, as torch.utils.data.distributed.DistributedSampler. Every replica gets the same
// number of indices: without drop_last the (shuffled) index list is padded by repeating its
// start; with drop_last its tail is dropped. When shuffling, epoch e's order comes from a
// generator seeded with seed + e, so all replicas agree; call set_epoch() before each epoch.
// One thread at a time.
#pragma once
#include <cstdint>

#include "data/sampler.h"

namespace ember::data {

class DistributedSampler : public Sampler {
 public:
  /// Throws ValueError when num_replicas == 0 or rank >= num_replicas.
  DistributedSampler(size_t dataset_size, size_t num_replicas, size_t rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  std::vector<size_t> indices() override;
  /// Indices per replica.
  size_t size() const override { return num_samples_; }
  void set_epoch(uint64_t epoch) { epoch_ = epoch; }
  uint64_t epoch() const { return epoch_; }
  /// num_samples * num_replicas.
  size_t total_size() const { return total_size_; }

 private:
  size_t dataset_size_;
  size_t num_replicas_;
  size_t rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  uint64_t epoch_ = 0;
  size_t num_samples_;
  size_t total_size_;
};

}  // namespace ember::data
