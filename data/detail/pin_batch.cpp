#include "data/detail/pin_batch.h"

#include "core/pinned_memory.h"
#include "core/warning.h"

namespace ember::data::detail {

bool pin_memory_enabled(bool requested) {
  if (!requested) return false;
  if (pinned_memory_available()) return true;
  EMBER_WARN_ONCE("DataLoader: pin_memory=true but no CUDA device is visible (ember built without CUDA, or no "
                  "GPU); batches stay in ordinary host memory");
  return false;
}

}  // namespace ember::data::detail
