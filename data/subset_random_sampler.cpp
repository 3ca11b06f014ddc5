#include "data/subset_random_sampler.h"

#include "data/detail/random_index.h"

namespace ember::data {

SubsetRandomSampler::SubsetRandomSampler(std::vector<size_t> indices, std::shared_ptr<Generator> generator)
    : indices_(std::move(indices)), generator_(std::move(generator)) {}

std::vector<size_t> SubsetRandomSampler::indices() {
  auto gen = detail::generator_or_fresh(generator_);
  std::vector<size_t> perm = detail::randperm(indices_.size(), *gen);
  std::vector<size_t> out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = indices_[perm[i]];
  return out;
}

}  // namespace ember::data
