#include "parallel/distributed/tcp/detail/socket.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>

namespace ember::parallel::tcp::detail {

std::string IoResult::describe() const {
  switch (status) {
    case IoStatus::OK: return "ok";
    case IoStatus::CLOSED: return "connection closed by the peer";
    case IoStatus::TIMEOUT: return "timed out";
    case IoStatus::ERROR:
      if (error == ECONNRESET || error == EPIPE)
        return std::string("connection reset (") + std::strerror(error) + ")";
      return std::string(std::strerror(error)) + " (errno " + std::to_string(error) + ")";
  }
  return "?";
}

int poll_timeout_ms(Clock::time_point deadline) {
  const auto now = Clock::now();
  if (now >= deadline) return 0;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

Socket::Socket(int fd) : fd_(fd) {}

Socket::~Socket() { close(); }

Socket::Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::configure(int buffer_bytes) {
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (buffer_bytes > 0) {
    // As root, *FORCE ignores net.core.[rw]mem_max; otherwise the kernel caps the request.
    if (::setsockopt(fd_, SOL_SOCKET, SO_SNDBUFFORCE, &buffer_bytes, sizeof buffer_bytes) != 0)
      ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof buffer_bytes);
    if (::setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &buffer_bytes, sizeof buffer_bytes) != 0)
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes);
  }
  const int flags = ::fcntl(fd_, F_GETFL, 0);
  ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
}

namespace {

// Waits for `events` on fd until the deadline. OK, TIMEOUT, or ERROR.
IoResult wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (r > 0) return {};
    if (r == 0) {
      if (Clock::now() >= deadline) return {IoStatus::TIMEOUT, 0, 0};
      continue;
    }
    if (errno == EINTR) continue;
    return {IoStatus::ERROR, errno, 0};
  }
}

// After a non-blocking call of a *_all loop failed with errno: nullopt to call again (EINTR, or
// fd became ready for `events` before the deadline); else what the loop returns, `transferred`
// bytes done.
std::optional<IoResult> after_failed_call(int fd, short events, Clock::time_point deadline, size_t transferred) {
  if (errno == EINTR) return std::nullopt;
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    IoResult w = wait_for(fd, events, deadline);
    if (w.ok()) return std::nullopt;
    w.transferred = transferred;
    return w;
  }
  return IoResult{IoStatus::ERROR, errno, transferred};
}

}  // namespace

IoResult Socket::send_some(const void* data, size_t n, size_t* sent) {
  *sent = 0;
  for (;;) {
    const ssize_t r = ::send(fd_, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r >= 0) {
      *sent = static_cast<size_t>(r);
      return {};
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {};
    return {IoStatus::ERROR, errno, 0};
  }
}

IoResult Socket::recv_some(void* data, size_t n, size_t* got) {
  *got = 0;
  for (;;) {
    const ssize_t r = ::recv(fd_, data, n, MSG_DONTWAIT);
    if (r > 0) {
      *got = static_cast<size_t>(r);
      return {};
    }
    if (r == 0) return n == 0 ? IoResult{} : IoResult{IoStatus::CLOSED, 0, 0};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {};
    return {IoStatus::ERROR, errno, 0};
  }
}

IoResult Socket::send_all(const void* data, size_t n, Clock::time_point deadline) {
  iovec iov{const_cast<void*>(data), n};
  return sendv_all(&iov, 1, deadline);
}

IoResult Socket::sendv_all(struct iovec* iov, int iovcnt, Clock::time_point deadline) {
  size_t total = 0;
  while (iovcnt > 0 && iov->iov_len == 0) { ++iov; --iovcnt; }
  while (iovcnt > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(iovcnt);
    const ssize_t r = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0) {
      if (auto result = after_failed_call(fd_, POLLOUT, deadline, total)) return *result;
      continue;
    }
    size_t left = static_cast<size_t>(r);
    total += left;
    while (iovcnt > 0 && left >= iov->iov_len) { left -= iov->iov_len; ++iov; --iovcnt; }
    if (iovcnt > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return {IoStatus::OK, 0, total};
}

IoResult Socket::recv_all(void* data, size_t n, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::recv(fd_, p + done, n - done, MSG_DONTWAIT);
    if (r > 0) {
      done += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return {IoStatus::CLOSED, 0, done};
    if (auto result = after_failed_call(fd_, POLLIN, deadline, done)) return *result;
  }
  return {IoStatus::OK, 0, done};
}

void Socket::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void Socket::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

}  // namespace ember::parallel::tcp::detail
