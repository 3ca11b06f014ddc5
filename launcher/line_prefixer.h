// LinePrefixer: turns one worker stream's bytes into whole lines, each written as
// "[rank N]: line\n" to an output descriptor in a single write (so lines of different
// ranks never interleave mid-line), and raw to an optional log file. A line longer than
// kMaxLineBytes is cut; finish() flushes a last line that lacks its newline.
// Not thread-safe: ember-run pumps all streams from one thread.
#pragma once
#include <cstddef>
#include <string>

namespace ember::launcher {

class LinePrefixer {
 public:
  static constexpr size_t kMaxLineBytes = 64 * 1024;

  /// log_fd < 0: no log. The descriptors are borrowed, not closed.
  LinePrefixer(std::string prefix, int out_fd, int log_fd = -1);
  void feed(const char* data, size_t n);
  void finish();

 private:
  void emit(const char* line, size_t n);

  std::string prefix_;
  int out_fd_;
  int log_fd_;
  std::string pending_;  // bytes after the last newline
};

}  // namespace ember::launcher
