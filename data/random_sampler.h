// RandomSampler: a random order of 0..n-1 each epoch (without replacement), or num_samples
// uniform draws (with replacement), as torch.utils.data.RandomSampler. With no generator each
// epoch seeds a fresh generator from ember's default generator (so ember::manual_seed decides
// the order); with one, all epochs draw from it. One thread at a time.
#pragma once
#include <memory>
#include <optional>

#include "core/generator.h"
#include "data/sampler.h"

namespace ember::data {

class RandomSampler : public Sampler {
 public:
  /// num_samples defaults to `size`; without replacement it may exceed `size` (whole
  /// permutations are concatenated). Throws ValueError when num_samples is 0.
  explicit RandomSampler(size_t size, bool replacement = false, std::optional<size_t> num_samples = std::nullopt,
                         std::shared_ptr<Generator> generator = nullptr);
  std::vector<size_t> indices() override;
  size_t size() const override { return num_samples_; }
  bool replacement() const { return replacement_; }

 private:
  size_t size_;
  bool replacement_;
  size_t num_samples_;
  std::shared_ptr<Generator> generator_;
};

}  // namespace ember::data
