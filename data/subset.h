// Subset: a view of a dataset at chosen indices, and random_split(), which partitions a
// dataset into non-overlapping random Subsets (by lengths or by fractions), as in
// torch.utils.data. Subsets share the dataset through a shared_ptr.
#pragma once
#include <cmath>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/generator.h"
#include "data/dataset.h"
#include "data/detail/random_index.h"

namespace ember::data {

template <MapStyleDataset D>
class Subset {
 public:
  using SampleType = typename D::SampleType;

  Subset(std::shared_ptr<D> dataset, std::vector<size_t> indices)
      : dataset_(std::move(dataset)), indices_(std::move(indices)) {}
  /// Throws IndexError when index >= size().
  SampleType get(size_t index) {
    EMBER_CHECK_T(IndexError, index < indices_.size(), "Subset: index ", index, " out of range for size ",
                  indices_.size());
    return dataset_->get(indices_[index]);
  }
  size_t size() const { return indices_.size(); }
  const std::vector<size_t>& indices() const { return indices_; }
  const std::shared_ptr<D>& dataset() const { return dataset_; }

 private:
  std::shared_ptr<D> dataset_;
  std::vector<size_t> indices_;
};

/// Splits into subsets of the given lengths, which must sum to dataset->size() (ValueError
/// otherwise). A null generator uses a fresh one seeded from ember's default generator.
template <MapStyleDataset D>
std::vector<Subset<D>> random_split(std::shared_ptr<D> dataset, const std::vector<size_t>& lengths,
                                    std::shared_ptr<Generator> generator = nullptr) {
  size_t total = 0;
  for (size_t l : lengths) total += l;
  EMBER_CHECK_T(ValueError, total == dataset->size(),
                "random_split: sum of input lengths (", total, ") does not equal the length of the input dataset (",
                dataset->size(), ")");
  auto gen = detail::generator_or_fresh(generator);
  std::vector<size_t> perm = detail::randperm(total, *gen);
  std::vector<Subset<D>> out;
  size_t offset = 0;
  for (size_t l : lengths) {
    out.emplace_back(dataset, std::vector<size_t>(perm.begin() + offset, perm.begin() + offset + l));
    offset += l;
  }
  return out;
}

/// Fractions summing to 1: lengths are floor(n * f), and the remainder is dealt round-robin
/// to the splits, as PyTorch does. Throws ValueError when a fraction is outside [0, 1] or
/// they do not sum to 1.
template <MapStyleDataset D>
std::vector<Subset<D>> random_split_fractions(std::shared_ptr<D> dataset, const std::vector<double>& fractions,
                                              std::shared_ptr<Generator> generator = nullptr) {
  double sum = 0;
  for (double f : fractions) {
    EMBER_CHECK_T(ValueError, f >= 0 && f <= 1, "random_split: fraction ", f, " is not between 0 and 1");
    sum += f;
  }
  EMBER_CHECK_T(ValueError, std::abs(sum - 1.0) < 1e-9 && !fractions.empty(),
                "random_split: fractions sum to ", sum, ", expected 1");
  const size_t n = dataset->size();
  std::vector<size_t> lengths;
  size_t assigned = 0;
  for (double f : fractions) {
    lengths.push_back(static_cast<size_t>(std::floor(static_cast<double>(n) * f)));
    assigned += lengths.back();
  }
  for (size_t i = 0; assigned < n; ++i, ++assigned) lengths[i % lengths.size()] += 1;
  return random_split(std::move(dataset), lengths, std::move(generator));
}

}  // namespace ember::data
