#include "data/detail/random_index.h"

#include <utility>

namespace ember::data::detail {

size_t uniform_index(size_t n, Generator& gen) {
  // Multiply-shift: bias at most n / 2^64.
  return static_cast<size_t>((static_cast<unsigned __int128>(gen.next_u64()) * n) >> 64);
}

double uniform_double(Generator& gen) { return static_cast<double>(gen.next_u64() >> 11) * 0x1.0p-53; }

std::vector<size_t> randperm(size_t n, Generator& gen) {
  std::vector<size_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = i;
  for (size_t i = n; i > 1; --i) std::swap(p[i - 1], p[uniform_index(i, gen)]);
  return p;
}

std::shared_ptr<Generator> generator_or_fresh(const std::shared_ptr<Generator>& gen) {
  if (gen) return gen;
  return std::make_shared<Generator>(default_generator().next_u64());
}

}  // namespace ember::data::detail
