#include "data/random_sampler.h"

#include "core/error.h"
#include "data/detail/random_index.h"

namespace ember::data {

RandomSampler::RandomSampler(size_t size, bool replacement, std::optional<size_t> num_samples,
                             std::shared_ptr<Generator> generator)
    : size_(size), replacement_(replacement), num_samples_(num_samples.value_or(size)),
      generator_(std::move(generator)) {
  EMBER_CHECK_T(ValueError, !num_samples || *num_samples > 0,
                "RandomSampler: num_samples should be a positive integer value, but got num_samples=0");
}

std::vector<size_t> RandomSampler::indices() {
  std::vector<size_t> out;
  if (size_ == 0) return out;
  auto gen = detail::generator_or_fresh(generator_);
  out.reserve(num_samples_);
  if (replacement_) {
    for (size_t i = 0; i < num_samples_; ++i) out.push_back(detail::uniform_index(size_, *gen));
    return out;
  }
  while (out.size() < num_samples_) {
    std::vector<size_t> perm = detail::randperm(size_, *gen);
    size_t take = std::min(perm.size(), num_samples_ - out.size());
    out.insert(out.end(), perm.begin(), perm.begin() + take);
  }
  return out;
}

}  // namespace ember::data
