// SubsetRandomSampler: the given indices in a random order each epoch, as
// torch.utils.data.SubsetRandomSampler. Generator rules as RandomSampler. One thread at a time.
#pragma once
#include <memory>

#include "core/generator.h"
#include "data/sampler.h"

namespace ember::data {

class SubsetRandomSampler : public Sampler {
 public:
  explicit SubsetRandomSampler(std::vector<size_t> indices, std::shared_ptr<Generator> generator = nullptr);
  std::vector<size_t> indices() override;
  size_t size() const override { return indices_.size(); }

 private:
  std::vector<size_t> indices_;
  std::shared_ptr<Generator> generator_;
};

}  // namespace ember::data
