#include "launcher/line_prefixer.h"

#include <cstring>

#include "core/fd_io.h"

namespace ember::launcher {

LinePrefixer::LinePrefixer(std::string prefix, int out_fd, int log_fd)
    : prefix_(std::move(prefix)), out_fd_(out_fd), log_fd_(log_fd) {}

void LinePrefixer::feed(const char* data, size_t n) {
  const char* end = data + n;
  while (data < end) {
    const char* nl = static_cast<const char*>(std::memchr(data, '\n', static_cast<size_t>(end - data)));
    if (!nl) {
      pending_.append(data, end);
      while (pending_.size() >= kMaxLineBytes) {
        emit(pending_.data(), kMaxLineBytes);
        pending_.erase(0, kMaxLineBytes);
      }
      return;
    }
    if (pending_.empty()) {
      emit(data, static_cast<size_t>(nl - data));
    } else {
      pending_.append(data, nl);
      emit(pending_.data(), pending_.size());
      pending_.clear();
    }
    data = nl + 1;
  }
}

void LinePrefixer::finish() {
  if (pending_.empty()) return;
  emit(pending_.data(), pending_.size());
  pending_.clear();
}

void LinePrefixer::emit(const char* line, size_t n) {
  std::string out;
  out.reserve(prefix_.size() + n + 1);
  out.append(prefix_).append(line, n).push_back('\n');
  // A closed stdout or a full disk must not stop ember-run: failures are dropped.
  io::write_full(out_fd_, out.data(), out.size());
  if (log_fd_ >= 0) io::write_full(log_fd_, out.data() + prefix_.size(), n + 1);
}

}  // namespace ember::launcher
