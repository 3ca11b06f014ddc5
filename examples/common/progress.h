// ProgressBar: one epoch's progress (samples done, samples/s, running loss; the unit is named by
// the caller: "samples", "tokens"). On a terminal it
// redraws one line in place with carriage returns (at most 10 times a second); otherwise (a
// pipe, a log file, CI) it prints a plain line at every 10% of the epoch. Single-threaded.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

namespace ember_examples {

enum class ProgressMode { Auto, Tty, Lines, None };

/// "auto" | "tty" | "lines" | "none"; throws ember::ValueError otherwise.
ProgressMode progress_mode_from_string(const std::string& s);

class ProgressBar {
 public:
  /// `label` prefixes every line ("epoch 1/3"); `total_samples` > 0. Auto picks Tty when `out`
  /// is a terminal, else Lines. `unit` names what is counted.
  ProgressBar(std::string label, size_t total_samples, ProgressMode mode = ProgressMode::Auto,
              std::FILE* out = stderr, std::string unit = "samples");
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// `samples_done` so far this epoch and the mean loss over them.
  void update(size_t samples_done, double running_loss);
  /// Draws the final state (ending the terminal line). Idempotent.
  void finish();
  ~ProgressBar() { finish(); }

 private:
  using Clock = std::chrono::steady_clock;
  void draw(bool final_line);

  std::string label_;
  size_t total_;
  ProgressMode mode_;
  std::FILE* out_;
  std::string unit_;
  Clock::time_point start_;
  Clock::time_point last_draw_;
  size_t done_ = 0;
  double loss_ = 0.0;
  int next_decile_ = 1;  // Lines mode: the next 10% mark to print
  bool finished_ = false;
};

}  // namespace ember_examples
