// GradMode: whether ops record the autograd graph. Thread-local, on by default; the engine's
// worker threads run backward with it off. AnomalyMode: global switch that makes nodes
// remember the forward op that created them and makes backward check for NaN.
#pragma once

namespace ember::autograd {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

/// RAII: sets a mode switch (GradMode, AnomalyMode: a struct with static is_enabled and
/// set_enabled) to `enabled` for its lifetime, then restores the value it found.
template <class Mode>
class ModeGuard {
 public:
  explicit ModeGuard(bool enabled) : prev_(Mode::is_enabled()) { Mode::set_enabled(enabled); }
  ~ModeGuard() { Mode::set_enabled(prev_); }
  ModeGuard(const ModeGuard&) = delete;
  ModeGuard& operator=(const ModeGuard&) = delete;

 private:
  bool prev_;
};

/// RAII: disables gradient recording in this thread for its lifetime (torch.no_grad()).
class NoGradGuard : public ModeGuard<GradMode> {
 public:
  NoGradGuard() : ModeGuard(false) {}
};

/// RAII: sets gradient recording to `enabled` for its lifetime (torch.set_grad_enabled).
class AutoGradMode : public ModeGuard<GradMode> {
 public:
  explicit AutoGradMode(bool enabled) : ModeGuard(enabled) {}
};

struct AnomalyMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

/// RAII: anomaly detection on for its lifetime (torch.autograd.detect_anomaly()).
class DetectAnomalyGuard : public ModeGuard<AnomalyMode> {
 public:
  DetectAnomalyGuard() : ModeGuard(true) {}
};

}  // namespace ember::autograd

namespace ember {
using autograd::NoGradGuard;
}
