#include "core/deterministic.h"

#include <atomic>
#include <mutex>
#include <set>
#include <string>

#include "core/error.h"
#include "core/thread_pool.h"
#include "core/warning.h"

namespace ember {

namespace {
std::atomic<bool> g_mode{false};
std::atomic<bool> g_warn_only{false};
std::mutex g_warned_mu;
std::set<std::string>& warned_ops() {  // guarded by g_warned_mu
  static std::set<std::string> ops;
  return ops;
}
}  // namespace

void use_deterministic_algorithms(bool mode, bool warn_only) {
  g_warn_only.store(mode && warn_only);
  const bool changed = g_mode.exchange(mode) != mode;
  if (changed) detail::apply_blas_threads();  // Note [Deterministic GEMM] in core/kernels/cpu/blas_gemm.cpp
}

bool are_deterministic_algorithms_enabled() { return g_mode.load(); }

bool is_deterministic_algorithms_warn_only_enabled() { return g_mode.load() && g_warn_only.load(); }

void alert_not_deterministic(const char* op) {
  if (!g_mode.load()) return;
  if (g_warn_only.load()) {
    std::lock_guard<std::mutex> lk(g_warned_mu);
    if (warned_ops().insert(op).second) {
      EMBER_WARN(op, " does not have a deterministic implementation, but use_deterministic_algorithms(true, "
                 "warn_only=true) is on; it runs nondeterministically");
    }
    return;
  }
  EMBER_THROW(NotImplementedError, op,
              " does not have a deterministic implementation, but you set use_deterministic_algorithms(true); "
              "call use_deterministic_algorithms(true, /*warn_only=*/true) to run it anyway with a warning");
}

DeterministicAlgorithmsGuard::DeterministicAlgorithmsGuard(bool mode, bool warn_only)
    : prev_mode_(are_deterministic_algorithms_enabled()), prev_warn_only_(is_deterministic_algorithms_warn_only_enabled()) {
  use_deterministic_algorithms(mode, warn_only);
}

DeterministicAlgorithmsGuard::~DeterministicAlgorithmsGuard() { use_deterministic_algorithms(prev_mode_, prev_warn_only_); }

}  // namespace ember
