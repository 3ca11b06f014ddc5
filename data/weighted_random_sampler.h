// WeightedRandomSampler: num_samples indices drawn with probability proportional to weights
// (with or without replacement), as torch.utils.data.WeightedRandomSampler. Generator rules
// as RandomSampler. One thread at a time.
#pragma once
#include <memory>

#include "core/generator.h"
#include "data/sampler.h"

namespace ember::data {

class WeightedRandomSampler : public Sampler {
 public:
  /// Throws ValueError for a negative or non-finite weight, all-zero weights, num_samples == 0,
  /// or (without replacement) num_samples above the number of positive weights.
  WeightedRandomSampler(std::vector<double> weights, size_t num_samples, bool replacement = true,
                        std::shared_ptr<Generator> generator = nullptr);
  std::vector<size_t> indices() override;
  size_t size() const override { return num_samples_; }

 private:
  std::vector<double> weights_;
  std::vector<double> cumulative_;
  size_t num_samples_;
  bool replacement_;
  std::shared_ptr<Generator> generator_;
};

}  // namespace ember::data
