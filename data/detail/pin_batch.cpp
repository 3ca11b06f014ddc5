#include "data/detail/pin_batch.h"

#include <atomic>
#include <cstdio>

#include "core/pinned_memory.h"

namespace ember::data::detail {

bool pin_memory_enabled(bool requested) {
  if (!requested) return false;
  if (pinned_memory_available()) return true;
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    std::fprintf(stderr,
                 "ember warning: DataLoader: pin_memory=true but no CUDA device is visible (ember built without "
                 "CUDA, or no GPU); batches stay in ordinary host memory\n");
  }
  return false;
}

}  // namespace ember::data::detail
