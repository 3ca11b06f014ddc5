// Sampler: decides the order in which a DataLoader visits dataset indices. Each call to
// indices() is one epoch and may draw from the sampler's generator, so two calls on a
// shuffling sampler give two different orders. Samplers are used by one thread at a time.
#pragma once
#include <cstddef>
#include <vector>

namespace ember::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  /// The indices of one epoch, in visiting order.
  virtual std::vector<size_t> indices() = 0;
  /// How many indices() returns.
  virtual size_t size() const = 0;
};

}  // namespace ember::data
