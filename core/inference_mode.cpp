#include "core/inference_mode.h"

namespace ember {
namespace {
thread_local bool t_inference_mode = false;
}

bool InferenceModeState::is_enabled() noexcept { return t_inference_mode; }
void InferenceModeState::set_enabled(bool enabled) noexcept { t_inference_mode = enabled; }

}  // namespace ember
