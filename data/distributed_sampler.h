// DistributedSampler: the share of a dataset's indices that replica `rank` of `num_replicas`
// visits, as torch.utils.data.distributed.DistributedSampler. By default every replica gets the
// same number of indices: without drop_last the (shuffled) index list is padded by repeating
// its start; with drop_last its tail is dropped. With `even = false` nothing is padded or
// dropped and the first dataset_size % num_replicas replicas get one index more (for
// DistributedDataParallel::join). When shuffling, epoch e's order comes from a generator seeded
// with seed + e, so all replicas agree; call set_epoch() before each epoch. set_start_index()
// resumes an epoch part way, at a position counted over all replicas (see Note [Global sample
// position]), so a job can resume on another number of replicas. One thread at a time.
#pragma once
#include <cstdint>

#include "data/sampler.h"

namespace ember::data {

struct DistributedSamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;
  /// Drop the tail so the shards are equal (with even).
  bool drop_last = false;
  /// Equal shards (pad, or drop with drop_last); false: no padding, shards differ by at most 1.
  bool even = true;
};

class DistributedSampler : public Sampler {
 public:
  /// Throws ValueError when num_replicas == 0, rank >= num_replicas, or drop_last without even.
  DistributedSampler(size_t dataset_size, size_t num_replicas, size_t rank, DistributedSamplerOptions options);
  DistributedSampler(size_t dataset_size, size_t num_replicas, size_t rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  std::vector<size_t> indices() override;
  /// Indices this replica visits this epoch (from the start index on).
  size_t size() const override { return num_samples_; }
  /// Starts epoch `epoch` at its beginning (start index 0).
  void set_epoch(uint64_t epoch);
  uint64_t epoch() const { return epoch_; }
  /// Resumes the current epoch at position `start` of its order, counted over all replicas (the
  /// samples every replica together consumed before); the remaining dataset_size - start
  /// positions are shared as a whole epoch would be. Kept until set_epoch. Throws ValueError
  /// when start > dataset_size.
  void set_start_index(size_t start);
  size_t start_index() const { return start_; }
  /// Indices all replicas visit this epoch: num_samples * num_replicas (the remaining
  /// positions when not even).
  size_t total_size() const { return total_size_; }

 private:
  void recount();

  size_t dataset_size_;
  size_t num_replicas_;
  size_t rank_;
  DistributedSamplerOptions options_;
  uint64_t epoch_ = 0;
  size_t start_ = 0;
  size_t num_samples_ = 0;
  size_t total_size_ = 0;
};

}  // namespace ember::data
