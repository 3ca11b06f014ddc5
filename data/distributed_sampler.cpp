#include "data/distributed_sampler.h"

#include "core/error.h"
#include "core/generator.h"
#include "data/detail/random_index.h"

namespace ember::data {

// Note [Global sample position]
// Epoch e has one order of the dataset (a permutation drawn from seed + e, or 0..n-1), the
// same for every number of replicas. Replica r of R visits positions start + r, start + r + R,
// ... of it, so a DataLoader batch k of b indices on each replica covers positions
// [start + k*b*R, start + (k+1)*b*R) of the order, exactly a single process's batch with the
// global batch b*R. A checkpoint that records how many samples all replicas consumed in the
// epoch (start) thus resumes on any R at the same global sample: set_epoch(e) then
// set_start_index(start). Padding (even, no drop_last) repeats the start of the remaining
// positions; it only happens when R does not divide them, and then batches differ from the
// single process's anyway.

DistributedSampler::DistributedSampler(size_t dataset_size, size_t num_replicas, size_t rank,
                                       DistributedSamplerOptions options)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), options_(options) {
  EMBER_CHECK_T(ValueError, num_replicas_ > 0, "DistributedSampler: num_replicas must be positive");
  EMBER_CHECK_T(ValueError, rank_ < num_replicas_, "DistributedSampler: invalid rank ", rank_,
                ", rank should be in the interval [0, ", num_replicas_ - 1, "]");
  EMBER_CHECK_T(ValueError, options_.even || !options_.drop_last,
                "DistributedSampler: drop_last=true needs even=true (it drops the tail to make the shards even)");
  recount();
}

DistributedSampler::DistributedSampler(size_t dataset_size, size_t num_replicas, size_t rank, bool shuffle,
                                       uint64_t seed, bool drop_last)
    : DistributedSampler(dataset_size, num_replicas, rank,
                         DistributedSamplerOptions{.shuffle = shuffle, .seed = seed, .drop_last = drop_last}) {}

void DistributedSampler::recount() {
  const size_t n = dataset_size_ - start_;
  const size_t R = num_replicas_;
  if (!options_.even) {
    num_samples_ = n > rank_ ? (n - rank_ + R - 1) / R : 0;
    total_size_ = n;
  } else if (options_.drop_last && n % R != 0) {
    num_samples_ = n / R;  // drop the tail so every replica gets the same amount
    total_size_ = num_samples_ * R;
  } else {
    num_samples_ = (n + R - 1) / R;
    total_size_ = num_samples_ * R;
  }
}

void DistributedSampler::set_epoch(uint64_t epoch) {
  epoch_ = epoch;
  start_ = 0;
  recount();
}

void DistributedSampler::set_start_index(size_t start) {
  EMBER_CHECK_T(ValueError, start <= dataset_size_, "DistributedSampler: start index ", start,
                " is past the end of the epoch (", dataset_size_, " samples)");
  start_ = start;
  recount();
}

std::vector<size_t> DistributedSampler::indices() {
  std::vector<size_t> all;
  if (options_.shuffle) {
    Generator g(options_.seed + epoch_);
    all = detail::randperm(dataset_size_, g);
  } else {
    all.resize(dataset_size_);
    for (size_t i = 0; i < dataset_size_; ++i) all[i] = i;
  }
  all.erase(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(start_));  // see Note [Global sample position]
  if (options_.even && !options_.drop_last) {
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
