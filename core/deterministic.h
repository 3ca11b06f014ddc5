// The process-wide deterministic-algorithms switch (PyTorch's torch.use_deterministic_algorithms):
// while it is on, an op that has no deterministic implementation on the device it runs on raises
// NotImplementedError naming the op instead of running (or, in warn-only mode, prints one warning
// per op and runs). Ops that do have both pick the deterministic one. Thread-safe (atomics).
// What the mode promises, and the world-size-invariant training built on it: docs/DETERMINISM.md.
#pragma once

namespace ember {

/// Turns the deterministic mode on or off for the whole process. `warn_only`: an op without a
/// deterministic implementation warns on stderr (once per op name) and runs instead of throwing.
void use_deterministic_algorithms(bool mode, bool warn_only = false);
/// Whether use_deterministic_algorithms(true) is in effect.
bool are_deterministic_algorithms_enabled();
/// Whether the mode is on in warn-only form.
bool is_deterministic_algorithms_warn_only_enabled();

/// Called by an op (`op`: its name and the path, e.g. "index_add_ (CUDA, floating point)") that is
/// about to run a nondeterministic implementation. Does nothing when the mode is off; throws
/// NotImplementedError naming the op when it is on; warns once per op in warn-only mode.
void alert_not_deterministic(const char* op);

/// RAII: sets the mode for a scope and restores the previous one (tests, benchmarks).
class DeterministicAlgorithmsGuard {
 public:
  explicit DeterministicAlgorithmsGuard(bool mode, bool warn_only = false);
  ~DeterministicAlgorithmsGuard();
  DeterministicAlgorithmsGuard(const DeterministicAlgorithmsGuard&) = delete;
  DeterministicAlgorithmsGuard& operator=(const DeterministicAlgorithmsGuard&) = delete;

 private:
  bool prev_mode_, prev_warn_only_;
};

}  // namespace ember
