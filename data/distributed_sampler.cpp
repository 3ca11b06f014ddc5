#include "data/distributed_sampler.h"

#include "core/error.h"
#include "core/generator.h"
#include "data/detail/random_index.h"

namespace ember::data {

DistributedSampler::DistributedSampler(size_t dataset_size, size_t num_replicas, size_t rank, bool shuffle,
                                       uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), shuffle_(shuffle), seed_(seed),
      drop_last_(drop_last) {
  EMBER_CHECK_T(ValueError, num_replicas_ > 0, "DistributedSampler: num_replicas must be positive");
  EMBER_CHECK_T(ValueError, rank_ < num_replicas_, "DistributedSampler: invalid rank ", rank_,
                ", rank should be in the interval [0, ", num_replicas_ - 1, "]");
  if (drop_last_ && dataset_size_ % num_replicas_ != 0) {
    // Drop the tail so every replica gets the same amount (PyTorch's formula).
    num_samples_ = dataset_size_ < num_replicas_ ? 0 : (dataset_size_ - num_replicas_ + num_replicas_ - 1) / num_replicas_;
  } else {
    num_samples_ = (dataset_size_ + num_replicas_ - 1) / num_replicas_;
  }
  total_size_ = num_samples_ * num_replicas_;
}

std::vector<size_t> DistributedSampler::indices() {
  std::vector<size_t> all;
  if (shuffle_) {
    Generator g(seed_ + epoch_);
    all = detail::randperm(dataset_size_, g);
  } else {
    all.resize(dataset_size_);
    for (size_t i = 0; i < dataset_size_; ++i) all[i] = i;
  }
  if (!drop_last_) {
    // Pad by repeating from the start (several times over when the list is shorter than the pad).
    const size_t n = all.size();
    for (size_t i = 0; all.size() < total_size_ && n > 0; ++i) all.push_back(all[i % n]);
  } else {
    all.resize(total_size_);
  }
  std::vector<size_t> out;
  out.reserve(num_samples_);
  for (size_t i = rank_; i < total_size_; i += num_replicas_) out.push_back(all[i]);
  return out;
}

}  // namespace ember::data
