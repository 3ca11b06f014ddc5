// MapDataset: a dataset whose samples are fn(inner.get(i)) (a transform), and the transform()
// helper that builds one. Holds the inner dataset by shared_ptr; thread-safety is that of
// the inner dataset and fn.
#pragma once
#include <functional>
#include <memory>
#include <type_traits>

#include "data/dataset.h"

namespace ember::data {

template <MapStyleDataset Inner, typename Fn>
class MapDataset {
 public:
  using InnerSample = typename Inner::SampleType;
  using SampleType = std::decay_t<std::invoke_result_t<Fn&, InnerSample>>;

  MapDataset(std::shared_ptr<Inner> inner, Fn fn) : inner_(std::move(inner)), fn_(std::move(fn)) {}
  SampleType get(size_t index) { return std::invoke(fn_, inner_->get(index)); }
  size_t size() const { return inner_->size(); }
  Inner& inner() { return *inner_; }

 private:
  std::shared_ptr<Inner> inner_;
  Fn fn_;
};

/// transform(dataset, fn): samples become fn(sample).
template <MapStyleDataset Inner, typename Fn>
MapDataset<Inner, Fn> transform(std::shared_ptr<Inner> inner, Fn fn) {
  return MapDataset<Inner, Fn>(std::move(inner), std::move(fn));
}

}  // namespace ember::data
