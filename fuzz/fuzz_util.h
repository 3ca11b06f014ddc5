// Small helpers shared by the fuzz targets in fuzz/: an in-memory file with a path (for the
// loaders, which take paths) and a connected socket pair (for the stream parsers). Each target
// is one process driven by one thread (libFuzzer's); nothing here is thread-safe.
#pragma once
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ember::fuzz {

/// Writes all n bytes to fd or aborts (a harness failure, not a finding).
inline void write_all_or_die(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      std::perror("fuzz harness: write");
      std::abort();
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

/// A memfd reachable by path ("/proc/self/fd/N"): each input replaces its contents, so the
/// loaders read a real file without touching the disk.
class MemFile {
 public:
  MemFile() : fd_(::memfd_create("ember_fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) {
      std::perror("fuzz harness: memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  const std::string& set(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0 || ::lseek(fd_, 0, SEEK_SET) != 0) std::abort();
    write_all_or_die(fd_, data, size);
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

/// A connected AF_UNIX stream pair; `reader` gets exactly the bytes written to `writer`,
/// then end of stream once the writer end is closed.
struct SocketPair {
  int reader = -1;
  int writer = -1;
  SocketPair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      std::perror("fuzz harness: socketpair");
      std::abort();
    }
    reader = fds[0];
    writer = fds[1];
    // Fuzz inputs are capped (-max_len) far below the default socket buffer, so writing the
    // whole input before reading never blocks; make sure anyway.
    int bytes = 1 << 20;
    ::setsockopt(writer, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  }
  void close_writer() {
    if (writer >= 0) ::close(writer);
    writer = -1;
  }
  ~SocketPair() {
    close_writer();
    if (reader >= 0) ::close(reader);
  }
  SocketPair(const SocketPair&) = delete;
  SocketPair& operator=(const SocketPair&) = delete;
};

}  // namespace ember::fuzz
