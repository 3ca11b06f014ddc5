#include "data/weighted_random_sampler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "data/detail/random_index.h"

namespace ember::data {

WeightedRandomSampler::WeightedRandomSampler(std::vector<double> weights, size_t num_samples, bool replacement,
                                             std::shared_ptr<Generator> generator)
    : weights_(std::move(weights)), num_samples_(num_samples), replacement_(replacement),
      generator_(std::move(generator)) {
  EMBER_CHECK_T(ValueError, num_samples_ > 0,
                "WeightedRandomSampler: num_samples should be a positive integer value, but got num_samples=0");
  double total = 0;
  size_t positive = 0;
  for (size_t i = 0; i < weights_.size(); ++i) {
    EMBER_CHECK_T(ValueError, std::isfinite(weights_[i]) && weights_[i] >= 0,
                  "WeightedRandomSampler: weight ", i, " is ", weights_[i], "; weights must be finite and >= 0");
    total += weights_[i];
    positive += weights_[i] > 0;
    cumulative_.push_back(total);
  }
  EMBER_CHECK_T(ValueError, total > 0, "WeightedRandomSampler: weights sum to 0");
  EMBER_CHECK_T(ValueError, replacement_ || num_samples_ <= positive, "WeightedRandomSampler: cannot draw ",
                num_samples_, " samples without replacement from ", positive, " indices with positive weight");
}

std::vector<size_t> WeightedRandomSampler::indices() {
  auto gen = detail::generator_or_fresh(generator_);
  std::vector<size_t> out;
  out.reserve(num_samples_);
  if (replacement_) {
    const double total = cumulative_.back();
    for (size_t i = 0; i < num_samples_; ++i) {
      double u = detail::uniform_double(*gen) * total;
      size_t k = std::upper_bound(cumulative_.begin(), cumulative_.end(), u) - cumulative_.begin();
      // u < total, so k is in range and, cumulative sums being strictly larger there, w[k] > 0.
      k = std::min(k, weights_.size() - 1);
      out.push_back(k);
    }
    return out;
  }
  // Without replacement: the num_samples largest keys log(u) / w (Efraimidis-Spirakis), which
  // has the distribution of drawing one at a time and removing what was drawn.
  std::vector<std::pair<double, size_t>> keys;
  keys.reserve(weights_.size());
  for (size_t i = 0; i < weights_.size(); ++i) {
    if (weights_[i] <= 0) continue;
    double u = detail::uniform_double(*gen);
    keys.emplace_back(std::log(u > 0 ? u : 0x1.0p-60) / weights_[i], i);
  }
  std::partial_sort(keys.begin(), keys.begin() + static_cast<ptrdiff_t>(num_samples_), keys.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; i < num_samples_; ++i) out.push_back(keys[i].second);
  return out;
}

}  // namespace ember::data
