#include "data/sequential_sampler.h"

namespace ember::data {

std::vector<size_t> SequentialSampler::indices() {
  std::vector<size_t> out(size_);
  for (size_t i = 0; i < size_; ++i) out[i] = i;
  return out;
}

}  // namespace ember::data
