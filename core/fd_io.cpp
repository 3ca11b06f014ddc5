#include "core/fd_io.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace ember::io {
namespace {

// One system call moves at most this much: Linux caps a transfer near 2 GiB anyway.
constexpr size_t kMaxChunk = size_t{1} << 30;

// Calls step(done, chunk) until num_bytes moved. A step returning 0 is end of file for a
// read; for a write it would loop forever, so it stops with EIO.
template <typename Step>
Transfer transfer(size_t num_bytes, bool is_read, Step step) {
  Transfer t;
  while (t.bytes < num_bytes) {
    const ssize_t r = step(t.bytes, std::min(num_bytes - t.bytes, kMaxChunk));
    if (r < 0) {
      if (errno == EINTR) continue;
      t.error = errno;
      return t;
    }
    if (r == 0) {
      if (!is_read) t.error = EIO;
      return t;
    }
    t.bytes += static_cast<size_t>(r);
  }
  return t;
}

}  // namespace

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);  // not retried on EINTR: Linux has released the descriptor already
  fd_ = fd;
}

Transfer read_full(int fd, void* buf, size_t num_bytes) {
  auto* p = static_cast<char*>(buf);
  return transfer(num_bytes, true, [&](size_t done, size_t n) { return ::read(fd, p + done, n); });
}

Transfer pread_full(int fd, void* buf, size_t num_bytes, uint64_t offset) {
  auto* p = static_cast<char*>(buf);
  return transfer(num_bytes, true,
                  [&](size_t done, size_t n) { return ::pread(fd, p + done, n, static_cast<off_t>(offset + done)); });
}

Transfer write_full(int fd, const void* buf, size_t num_bytes) {
  const auto* p = static_cast<const char*>(buf);
  return transfer(num_bytes, false, [&](size_t done, size_t n) { return ::write(fd, p + done, n); });
}

Transfer pwrite_full(int fd, const void* buf, size_t num_bytes, uint64_t offset) {
  const auto* p = static_cast<const char*>(buf);
  return transfer(num_bytes, false, [&](size_t done, size_t n) {
    return ::pwrite(fd, p + done, n, static_cast<off_t>(offset + done));
  });
}

Transfer send_full(int fd, const void* buf, size_t num_bytes) {
  const auto* p = static_cast<const char*>(buf);
  return transfer(num_bytes, false, [&](size_t done, size_t n) { return ::send(fd, p + done, n, MSG_NOSIGNAL); });
}

Transfer recv_full(int fd, void* buf, size_t num_bytes) {
  auto* p = static_cast<char*>(buf);
  return transfer(num_bytes, true, [&](size_t done, size_t n) { return ::recv(fd, p + done, n, 0); });
}

}  // namespace ember::io
