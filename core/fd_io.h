// File descriptors: UniqueFd owns one, and whole-buffer reads and writes retried across
// EINTR and short transfers are the one loop that serialization, the DataLoader's wire,
// ember-run's output and FileStore share. No exceptions and no tensors: each caller turns a failure into its
// own typed error with its own context. Built as ember_fd_io, a library of its own (as
// ember_affinity is), so ember-run links it without ember_core. Stateless; thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ember::io {

/// Owns a descriptor and closes it when destroyed. Move-only; -1 means none.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Gives up ownership without closing.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  /// Closes the descriptor held (if any) and takes `fd`.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// How far a transfer got. `bytes` < the size asked for means it stopped early: at end of
/// file (error == 0, reads only) or on the failure whose errno is `error`.
struct Transfer {
  size_t bytes = 0;
  int error = 0;
  bool complete(size_t num_bytes) const { return bytes == num_bytes; }
};

/// read(2) until num_bytes arrived, end of file, or an error other than EINTR.
Transfer read_full(int fd, void* buf, size_t num_bytes);
/// pread(2) from `offset` on, as read_full.
Transfer pread_full(int fd, void* buf, size_t num_bytes, uint64_t offset);
/// write(2) until all num_bytes are written or an error other than EINTR.
Transfer write_full(int fd, const void* buf, size_t num_bytes);
/// pwrite(2) at `offset` on, as write_full.
Transfer pwrite_full(int fd, const void* buf, size_t num_bytes, uint64_t offset);
/// send(2) with MSG_NOSIGNAL (a closed peer is EPIPE, never SIGPIPE), as write_full.
Transfer send_full(int fd, const void* buf, size_t num_bytes);
/// recv(2), as read_full (end of stream stops it with error == 0).
Transfer recv_full(int fd, void* buf, size_t num_bytes);

}  // namespace ember::io
