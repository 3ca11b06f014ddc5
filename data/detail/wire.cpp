#include "data/detail/wire.h"

#include <cerrno>
#include <sys/socket.h>
#include <unistd.h>

namespace ember::data::detail {
namespace {

// Returns false when the peer is gone.
bool send_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EPIPE || errno == ECONNRESET) return false;
      EMBER_THROW(Error, "DataLoader: send on socket ", fd, " failed: ", std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Returns the bytes read; fewer than n only at end of stream.
size_t recv_all(int fd, char* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::recv(fd, p + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == ECONNRESET) return got;
      EMBER_THROW(Error, "DataLoader: recv on socket ", fd, " failed: ", std::strerror(errno));
    }
    if (r == 0) return got;
    got += static_cast<size_t>(r);
  }
  return got;
}

}  // namespace

bool send_frame(int fd, std::string_view payload) {
  // One send for header and payload when small: keeps frames in one segment.
  uint64_t n = payload.size();
  if (n <= 4096) {
    char buf[4096 + sizeof(uint64_t)];
    std::memcpy(buf, &n, sizeof(n));
    std::memcpy(buf + sizeof(n), payload.data(), n);
    return send_all(fd, buf, sizeof(n) + n);
  }
  return send_all(fd, reinterpret_cast<const char*>(&n), sizeof(n)) && send_all(fd, payload.data(), n);
}

std::optional<std::string> recv_frame(int fd) {
  uint64_t n = 0;
  size_t got = recv_all(fd, reinterpret_cast<char*>(&n), sizeof(n));
  if (got < sizeof(n)) return std::nullopt;
  std::string payload(n, '\0');
  if (recv_all(fd, payload.data(), n) < n) return std::nullopt;
  return payload;
}

}  // namespace ember::data::detail
