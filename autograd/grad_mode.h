// GradMode: whether ops record the autograd graph. Thread-local, on by default; the engine's
// worker threads run backward with it off. AnomalyMode: global switch that makes nodes
// remember the forward op that created them and makes backward check for NaN.
#pragma once

namespace ember::autograd {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

/// RAII: disables gradient recording in this thread for its lifetime (torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

/// RAII: sets gradient recording to `enabled` for its lifetime (torch.set_grad_enabled).
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : prev_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~AutoGradMode() { GradMode::set_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};

struct AnomalyMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

/// RAII: anomaly detection on for its lifetime (torch.autograd.detect_anomaly()).
class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard() : prev_(AnomalyMode::is_enabled()) { AnomalyMode::set_enabled(true); }
  ~DetectAnomalyGuard() { AnomalyMode::set_enabled(prev_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace ember::autograd

namespace ember {
using autograd::NoGradGuard;
}
