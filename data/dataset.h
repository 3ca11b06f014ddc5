// Dataset<Sample>: a map-style dataset (get(index), size()), and IterableDataset<Sample>: a
// stream of samples (reset() starts a pass, next() yields until std::nullopt), as in
// torch.utils.data. A DataLoader with workers calls them inside forked worker processes, each
// on its own copy of the dataset, so they need no locking there; get() may mutate the dataset
// (a per-worker RNG, a file handle opened lazily).
#pragma once
#include <concepts>
#include <cstddef>
#include <optional>
#include <vector>

namespace ember::data {

template <typename Sample>
class Dataset {
 public:
  using SampleType = Sample;
  virtual ~Dataset() = default;
  /// The sample at `index` (< size()); implementations throw IndexError when out of range.
  virtual Sample get(size_t index) = 0;
  virtual size_t size() const = 0;
};

template <typename Sample>
class IterableDataset {
 public:
  using SampleType = Sample;
  virtual ~IterableDataset() = default;
  /// Starts a pass. Called in the process that iterates: inside a worker get_worker_info()
  /// says which share of the stream this copy should produce.
  virtual void reset() = 0;
  /// The next sample of this pass, or std::nullopt when the pass is over.
  virtual std::optional<Sample> next() = 0;
};

/// Anything with SampleType, get(size_t) and size(): what DataLoader, Subset, ... accept.
template <typename D>
concept MapStyleDataset = requires(D& d, const D& cd, size_t i) {
  typename D::SampleType;
  { d.get(i) } -> std::convertible_to<typename D::SampleType>;
  { cd.size() } -> std::convertible_to<size_t>;
};

template <typename D>
concept IterableStyleDataset = requires(D& d) {
  typename D::SampleType;
  d.reset();
  { d.next() } -> std::same_as<std::optional<typename D::SampleType>>;
};

}  // namespace ember::data
