#include "core/detail/cpu_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>

#include "core/env.h"

namespace ember::detail {
namespace {

// Note [Huge pages for CPU segments]
// A CPU segment that is a whole number of 2 MiB (every small-pool and large-pool segment of
// the preferred sizes; not an exact-size segment made under a memory limit, which stays as it
// is rather than grow past the limit) is 2 MiB-aligned and marked MADV_HUGEPAGE, so that where
// the kernel's transparent huge pages are "madvise" or "always" it is backed by 2 MiB pages
// (as PyTorch's CPU allocations under THP_MEM_ALLOC_ENABLE=1): a training step walks tens of
// MiB of activations, more than a core's TLB covers with 4 KiB pages. EMBER_CPU_HUGEPAGES=0
// turns it off (segments 64-byte-aligned); a kernel without THP refuses the madvise, which
// changes nothing else. Segments are cached (Note [Caching allocator]): a huge page is faulted
// in once.
constexpr size_t kHugePage = size_t{2} << 20;

bool cpu_hugepages_enabled() {
  static const bool on = env::flag("EMBER_CPU_HUGEPAGES", true);
  return on;
}

}  // namespace

void* cpu_alloc(size_t num_bytes, int) {
  if (num_bytes >= kHugePage && num_bytes % kHugePage == 0 && cpu_hugepages_enabled()) {
    void* p = std::aligned_alloc(kHugePage, num_bytes);
    if (p != nullptr) (void)madvise(p, num_bytes, MADV_HUGEPAGE);  // advice only: refused where THP is absent
    return p;
  }
  // Segment sizes are multiples of 512, so aligned_alloc's size rule holds.
  return std::aligned_alloc(64, num_bytes);
}
void cpu_free(void* ptr, int) { std::free(ptr); }
size_t cpu_capacity(int) {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<size_t>(pages) * static_cast<size_t>(page_size);
}

}  // namespace ember::detail
