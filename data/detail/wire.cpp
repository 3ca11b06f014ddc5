#include "data/detail/wire.h"

#include <algorithm>
#include <cerrno>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

namespace ember::data::detail {
namespace {

// The frame's first bytes through sendmsg, with the descriptor as ancillary data; returns
// the bytes sent (>= 1) or -1 with errno set.
ssize_t send_first(int fd, const char* p, size_t n, int attached_fd) {
  iovec iov{const_cast<char*>(p), n};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &attached_fd, sizeof(int));
  ssize_t w;
  do {
    w = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
  } while (w < 0 && errno == EINTR);
  return w;
}

// Returns false when the peer is gone.
bool send_all(int fd, const char* p, size_t n, int attached_fd) {
  if (attached_fd >= 0) {
    const ssize_t w = send_first(fd, p, n, attached_fd);
    if (w < 0) {
      if (errno == EPIPE || errno == ECONNRESET) return false;
      EMBER_THROW(Error, "DataLoader: sendmsg on socket ", fd, " failed: ", std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  const io::Transfer t = io::send_full(fd, p, n);
  if (t.complete(n)) return true;
  if (t.error == EPIPE || t.error == ECONNRESET) return false;
  EMBER_THROW(Error, "DataLoader: send on socket ", fd, " failed: ", std::strerror(t.error));
}

// The frame's header through recvmsg, so that a descriptor riding on its first byte is
// taken (a descriptor is delivered to whichever read consumes that byte). Returns the bytes
// read; fewer than n only at end of stream.
size_t recv_header(int fd, char* p, size_t n, io::UniqueFd* received_fd) {
  size_t got = 0;
  while (got < n) {
    iovec iov{p + got, n - got};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t r = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == ECONNRESET) return got;
      EMBER_THROW(Error, "DataLoader: recvmsg on socket ", fd, " failed: ", std::strerror(errno));
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int passed;
        std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        io::UniqueFd owned(passed);  // closed here unless it is the one the caller takes
        if (received_fd != nullptr && !received_fd->valid()) *received_fd = std::move(owned);
      }
    }
    if (r == 0) return got;
    got += static_cast<size_t>(r);
  }
  return got;
}

}  // namespace

bool send_frame(int fd, std::string_view payload, int attached_fd) {
  // One send for header and payload when small: keeps frames in one segment.
  uint64_t n = payload.size();
  if (n <= 4096) {
    char buf[4096 + sizeof(uint64_t)];
    std::memcpy(buf, &n, sizeof(n));
    std::memcpy(buf + sizeof(n), payload.data(), n);
    return send_all(fd, buf, sizeof(n) + n, attached_fd);
  }
  return send_all(fd, reinterpret_cast<const char*>(&n), sizeof(n), attached_fd) &&
         send_all(fd, payload.data(), n, -1);
}

std::optional<std::string> recv_frame(int fd, io::UniqueFd* received_fd) {
  if (received_fd != nullptr) received_fd->reset();
  uint64_t n = 0;
  if (recv_header(fd, reinterpret_cast<char*>(&n), sizeof(n), received_fd) < sizeof(n)) return std::nullopt;
  EMBER_CHECK(n <= kMaxFrameBytes, "DataLoader: socket ", fd, " announced a frame of ", n, " bytes, over the ",
              kMaxFrameBytes, "-byte limit (a corrupted stream?)");
  // The buffer grows with the bytes that actually arrive (doubling from 64 KiB), so a length
  // field the stream never pays for costs no memory (fuzz/corpus/dataloader_wire/crash_*).
  std::string payload;
  while (payload.size() < n) {
    const size_t have = payload.size();
    const size_t step = static_cast<size_t>(std::min<uint64_t>(n - have, std::max<size_t>(size_t{64} << 10, have)));
    payload.resize(have + step);
    const io::Transfer t = io::recv_full(fd, payload.data() + have, step);
    if (t.error != 0 && t.error != ECONNRESET)
      EMBER_THROW(Error, "DataLoader: recv on socket ", fd, " failed: ", std::strerror(t.error));
    if (!t.complete(step)) return std::nullopt;
  }
  return payload;
}

}  // namespace ember::data::detail
