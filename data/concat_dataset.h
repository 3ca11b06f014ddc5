// ConcatDataset: several datasets of one sample type, one after another, as
// torch.utils.data.ConcatDataset. Index lookup is a binary search over cumulative sizes,
// computed at construction (the parts must not change size afterwards).
#pragma once
#include <algorithm>
#include <memory>
#include <vector>

#include "core/error.h"
#include "data/dataset.h"

namespace ember::data {

template <MapStyleDataset D>
class ConcatDataset {
 public:
  using SampleType = typename D::SampleType;

  /// Throws ValueError when `parts` is empty.
  explicit ConcatDataset(std::vector<std::shared_ptr<D>> parts) : parts_(std::move(parts)) {
    EMBER_CHECK_T(ValueError, !parts_.empty(), "ConcatDataset: datasets should not be an empty list");
    size_t total = 0;
    for (const auto& p : parts_) {
      total += p->size();
      cumulative_.push_back(total);
    }
  }
  /// Throws IndexError when index >= size().
  SampleType get(size_t index) {
    EMBER_CHECK_T(IndexError, index < size(), "ConcatDataset: index ", index, " out of range for size ", size());
    size_t part = std::upper_bound(cumulative_.begin(), cumulative_.end(), index) - cumulative_.begin();
    size_t start = part == 0 ? 0 : cumulative_[part - 1];
    return parts_[part]->get(index - start);
  }
  size_t size() const { return cumulative_.back(); }
  const std::vector<size_t>& cumulative_sizes() const { return cumulative_; }

 private:
  std::vector<std::shared_ptr<D>> parts_;
  std::vector<size_t> cumulative_;
};

}  // namespace ember::data
