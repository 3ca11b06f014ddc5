// Socket: one connected TCP stream of the tcp backend, non-blocking underneath, with
// blocking send/recv helpers that take a deadline. Another thread may call shutdown() at
// any time to abort a send or recv in progress (it returns with an error at once); apart
// from that, one thread sends and at most one other receives at a time.
#pragma once
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ember::parallel::tcp::detail {

using Clock = std::chrono::steady_clock;

/// Why an I/O call failed.
enum class IoStatus { OK, CLOSED, TIMEOUT, ERROR };

struct IoResult {
  IoStatus status = IoStatus::OK;
  int error = 0;              // errno for ERROR
  size_t transferred = 0;     // bytes moved before the failure
  bool ok() const { return status == IoStatus::OK; }
  /// "connection closed by the peer", "timed out", "Connection reset by peer (errno 104)".
  std::string describe() const;
};

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd);
  ~Socket();
  Socket(Socket&& o) noexcept;
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  /// TCP_NODELAY, non-blocking, and (buffer_bytes > 0) SO_SNDBUF/SO_RCVBUF of that size.
  void configure(int buffer_bytes);

  /// Sends all n bytes (or the iovecs) before the deadline.
  IoResult send_all(const void* data, size_t n, Clock::time_point deadline);
  IoResult sendv_all(struct iovec* iov, int iovcnt, Clock::time_point deadline);
  /// Receives exactly n bytes before the deadline.
  IoResult recv_all(void* data, size_t n, Clock::time_point deadline);
  /// Receives what is there right now (up to n bytes), never waiting.
  IoResult recv_some(void* data, size_t n, size_t* got);
  /// Sends what fits right now (up to n bytes), never waiting.
  IoResult send_some(const void* data, size_t n, size_t* sent);

  /// Wakes any thread blocked in this socket's send/recv; the connection is dead afterwards.
  /// Thread-safe and idempotent.
  void shutdown();
  void close();

 private:
  int fd_ = -1;
};

/// Remaining milliseconds until `deadline` for poll(): >= 0, capped at INT32_MAX.
int poll_timeout_ms(Clock::time_point deadline);

}  // namespace ember::parallel::tcp::detail
