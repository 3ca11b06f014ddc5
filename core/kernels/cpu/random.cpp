#include "core/kernels/cpu/random.h"

#include "core/kernels/index.h"
#include "core/thread_pool.h"

namespace ember::kernels::cpu {
namespace {

constexpr int64_t kGrainBlocks = 2048;  // Philox blocks per parallel chunk (~8k floats)

}  // namespace

void random_fill(const RandomLaunch& r, int /*device_index*/) {
  if (r.t.n <= 0) return;
  visit_random</*kWith16BitFloats=*/true>(r, [](const auto& f, int64_t blocks) {
    parallel_for(0, blocks, kGrainBlocks, [&](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; ++b) f(b);
    });
  });
}

int64_t first_invalid_probability(DType dtype, const void* p, int64_t n, void* /*slot*/, int /*device_index*/) {
  return EMBER_RANDOM_DISPATCH_FLOATING(dtype, "bernoulli", [&]() -> int64_t {
    const ProbabilityInRange<scalar_t> ok{static_cast<const scalar_t*>(p)};
    for (int64_t i = 0; i < n; ++i) {
      if (!ok(i)) return i;
    }
    return -1;
  });
}

}  // namespace ember::kernels::cpu
