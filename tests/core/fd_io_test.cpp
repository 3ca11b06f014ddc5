// core/fd_io.h: whole transfers across short reads, end of file, a closed peer and signals
// that interrupt the system calls (EINTR), and UniqueFd's ownership.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/fd_io.h"

namespace ember {
namespace {

std::string temp_path() {
  std::string p = "/tmp/ember_fd_io_test_XXXXXX";
  const int fd = ::mkstemp(p.data());
  ::close(fd);
  return p;
}

TEST(FdIo, ReadFullStopsAtEndOfFileWithoutAnError) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ASSERT_EQ(::write(p[1], "abc", 3), 3);
  ::close(p[1]);
  char buf[8];
  const io::Transfer t = io::read_full(p[0], buf, sizeof buf);
  EXPECT_EQ(t.bytes, 3u);
  EXPECT_EQ(t.error, 0);
  EXPECT_FALSE(t.complete(sizeof buf));
  ::close(p[0]);
}

TEST(FdIo, PositionalTransfersUseTheirOffsets) {
  const std::string path = temp_path();
  io::UniqueFd fd(::open(path.c_str(), O_RDWR));
  ASSERT_TRUE(fd.valid());
  EXPECT_TRUE(io::pwrite_full(fd.get(), "world", 5, 6).complete(5));
  EXPECT_TRUE(io::pwrite_full(fd.get(), "hello ", 6, 0).complete(6));
  char buf[11];
  EXPECT_TRUE(io::pread_full(fd.get(), buf, 11, 0).complete(11));
  EXPECT_EQ(std::string(buf, 11), "hello world");
  const io::Transfer past_end = io::pread_full(fd.get(), buf, 4, 9);
  EXPECT_EQ(past_end.bytes, 2u);
  EXPECT_EQ(past_end.error, 0);
  ::unlink(path.c_str());
}

TEST(FdIo, SendToAClosedPeerIsEpipeNotSigpipe) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ::close(sv[1]);
  const io::Transfer t = io::send_full(sv[0], "x", 1);  // SIGPIPE would end the test binary
  EXPECT_EQ(t.bytes, 0u);
  EXPECT_EQ(t.error, EPIPE);
  ::close(sv[0]);
}

// A timer signal without SA_RESTART interrupts the blocked read and write again and again;
// every byte still arrives, in order.
TEST(FdIo, InterruptedTransfersAreResumed) {
  struct sigaction sa {};
  sa.sa_handler = [](int) {};
  sa.sa_flags = 0;  // no SA_RESTART: the calls fail with EINTR
  struct sigaction old {};
  ASSERT_EQ(::sigaction(SIGALRM, &sa, &old), 0);
  itimerval every_ms{{0, 1000}, {0, 1000}};
  ASSERT_EQ(::setitimer(ITIMER_REAL, &every_ms, nullptr), 0);
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  std::vector<unsigned char> sent(4 << 20), got(sent.size());
  for (size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<unsigned char>(i * 7 + i / 251);
  std::thread writer([&] {
    // Slowly, in pieces, so the reader blocks (and is interrupted) many times.
    for (size_t off = 0; off < sent.size(); off += 256 << 10) {
      EXPECT_TRUE(io::write_full(p[1], sent.data() + off, 256 << 10).complete(256 << 10));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  const io::Transfer t = io::read_full(p[0], got.data(), got.size());
  writer.join();
  itimerval off{};
  ::setitimer(ITIMER_REAL, &off, nullptr);
  ::sigaction(SIGALRM, &old, nullptr);
  EXPECT_TRUE(t.complete(got.size())) << t.bytes << " bytes, errno " << t.error;
  EXPECT_EQ(got, sent);
  ::close(p[0]);
  ::close(p[1]);
}

TEST(UniqueFd, ClosesOnceAndMovesOwnership) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ::close(p[1]);
  io::UniqueFd a(p[0]);
  io::UniqueFd b(std::move(a));
  EXPECT_FALSE(a.valid());
  EXPECT_EQ(b.get(), p[0]);
  b.reset();
  EXPECT_EQ(::fcntl(p[0], F_GETFD), -1);  // closed
  EXPECT_EQ(errno, EBADF);
}

}  // namespace
}  // namespace ember
