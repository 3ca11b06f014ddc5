// Fuzz target: the TCPStore server's frame parser (parallel/distributed/tcp_store_server.cpp,
// Note [TCPStore protocol]) through a real connection to an in-process server, so the bytes
// take exactly the path a stranger's would. Bit 0 of the first byte sends a valid kAuth frame
// first (reaching the request parser without the fuzzer having to find the magic); the rest
// of the input is written as is, then the write side is shut and the harness reads whatever
// the server answers until it closes the connection. The server must survive every input: a
// crash, a sanitizer report, a hang (libFuzzer's -timeout) or a dead server (the next connect
// fails) is a finding. Seeds: fuzz/corpus/store_frame (fuzz/make_seeds.cpp).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "parallel/distributed/detail/wire.h"
#include "parallel/distributed/tcp_store_server.h"

namespace {

using ember::parallel::TCPStoreServer;
namespace wire = ember::parallel::detail;

// A fresh server every kInputsPerServer inputs keeps the key space (which SETs grow) small.
constexpr int kInputsPerServer = 5000;

// A connect interrupted by a signal (libFuzzer's -timeout alarm fires every second) goes on in
// the background: wait up to 10 s for it and take its result, as a second connect() may not.
// False (errno set) when it failed or did not finish: the server is dead or hung.
bool connect_finished_after_eintr(int fd) {
  if (errno != EINTR) return false;
  pollfd pfd{fd, POLLOUT, 0};
  int r;
  do {
    r = ::poll(&pfd, 1, 10'000);
  } while (r < 0 && errno == EINTR);
  if (r == 0) errno = ETIMEDOUT;
  if (r <= 0) return false;
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return false;
  errno = err;
  return err == 0;
}

int connect_to(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) std::abort();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && !connect_finished_after_eintr(fd)) {
    std::perror("store_frame_fuzz: connect to the server (did it die?)");
    std::abort();
  }
  // Reset on close: no TIME_WAIT, so tens of thousands of inputs do not exhaust local ports.
  linger lg{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static std::unique_ptr<TCPStoreServer> server;
  static int inputs = 0;
  if (!server || ++inputs % kInputsPerServer == 0) {
    server.reset();
    ember::parallel::TCPStoreServerOptions options;
    options.bind_address = "127.0.0.1";
    options.token = "fuzz-token";
    options.max_frame_bytes = 1 << 16;
    server = std::make_unique<TCPStoreServer>(options);
  }
  const int fd = connect_to(server->port());
  if (data[0] & 1) {
    std::vector<uint8_t> auth = wire::FrameWriter()
                                    .u8(static_cast<uint8_t>(wire::Op::kAuth))
                                    .bytes(wire::kAuthMagic)
                                    .bytes(std::string_view("fuzz-token"))
                                    .finish();
    ember::fuzz::write_all_or_die(fd, auth.data(), auth.size());
  }
  // The server may close mid-input (a malformed frame); a failed write is then expected.
  const uint8_t* p = data + 1;
  size_t n = size - 1;
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) break;
    p += w;
    n -= static_cast<size_t>(w);
  }
  ::shutdown(fd, SHUT_WR);
  // Drain the answers until the server closes (it does on our end of stream, also with a
  // parked GET/WAIT). 10 s without a byte or the close is a hang.
  char buf[4096];
  while (true) {
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, 10'000);
    if (ready == 0) {
      std::fprintf(stderr, "store_frame_fuzz: the server neither answered nor closed within 10 s\n");
      std::abort();
    }
    const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r <= 0) break;
  }
  ::close(fd);
  return 0;
}
