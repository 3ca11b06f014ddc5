#include "autograd/grad_mode.h"

#include <atomic>

namespace ember::autograd {
namespace {
thread_local bool t_grad_enabled = true;
std::atomic<bool> g_anomaly{false};
}  // namespace

bool GradMode::is_enabled() { return t_grad_enabled; }
void GradMode::set_enabled(bool enabled) { t_grad_enabled = enabled; }
bool AnomalyMode::is_enabled() { return g_anomaly.load(std::memory_order_relaxed); }
void AnomalyMode::set_enabled(bool enabled) { g_anomaly.store(enabled, std::memory_order_relaxed); }

}  // namespace ember::autograd
