#include "examples/common/progress.h"

#include <unistd.h>

#include <algorithm>

#include "core/error.h"

namespace ember_examples {

ProgressMode progress_mode_from_string(const std::string& s) {
  if (s == "auto") return ProgressMode::Auto;
  if (s == "tty") return ProgressMode::Tty;
  if (s == "lines") return ProgressMode::Lines;
  if (s == "none") return ProgressMode::None;
  EMBER_THROW(ember::ValueError, "--progress: expected auto, tty, lines or none, got '", s, "'");
}

ProgressBar::ProgressBar(std::string label, size_t total_samples, ProgressMode mode, std::FILE* out, std::string unit)
    : label_(std::move(label)), total_(std::max<size_t>(1, total_samples)), mode_(mode), out_(out),
      unit_(std::move(unit)) {
  if (mode_ == ProgressMode::Auto) mode_ = ::isatty(::fileno(out_)) ? ProgressMode::Tty : ProgressMode::Lines;
  start_ = last_draw_ = Clock::now();
}

void ProgressBar::update(size_t samples_done, double running_loss) {
  done_ = samples_done;
  loss_ = running_loss;
  if (mode_ == ProgressMode::Tty) {
    const auto now = Clock::now();
    if (now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    draw(false);
  } else if (mode_ == ProgressMode::Lines) {
    const int decile = static_cast<int>(done_ * 10 / total_);
    if (decile < next_decile_ || done_ >= total_) return;  // 100% is printed by finish()
    next_decile_ = decile + 1;
    draw(false);
  }
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (mode_ == ProgressMode::None || done_ == 0) return;
  draw(true);
}

void ProgressBar::draw(bool final_line) {
  const double elapsed_s = std::chrono::duration<double>(Clock::now() - start_).count();
  const double rate = elapsed_s > 0 ? static_cast<double>(done_) / elapsed_s : 0.0;
  const int pct = static_cast<int>(done_ * 100 / total_);
  if (mode_ == ProgressMode::Tty) {
    constexpr int kWidth = 30;
    const int fill = static_cast<int>(done_ * kWidth / total_);
    std::string bar(static_cast<size_t>(fill), '#');
    bar.append(static_cast<size_t>(kWidth - fill), '.');
    std::fprintf(out_, "\r%s [%s] %3d%% %zu/%zu  %.0f %s/s  loss %.4f\033[K%s", label_.c_str(), bar.c_str(), pct,
                 done_, total_, rate, unit_.c_str(), loss_, final_line ? "\n" : "");
  } else {
    std::fprintf(out_, "%s %3d%% %zu/%zu %s  %.0f %s/s  loss %.4f\n", label_.c_str(), pct, done_, total_,
                 unit_.c_str(), rate, unit_.c_str(), loss_);
  }
  std::fflush(out_);
}

}  // namespace ember_examples
