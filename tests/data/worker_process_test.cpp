// Tensor-free DataLoader machinery: frames over sockets, shared-memory segments, and forked
// workers that are always reaped.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/detail/shm_segment.h"
#include "data/detail/wire.h"
#include "data/detail/worker_process.h"
#include "tests/data/test_util.h"

namespace ember::data {
namespace {

using detail::WorkerProcess;

TEST(Wire, FramesRoundTripIncludingLargeOnes) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  detail::ByteWriter w;
  w.put<uint64_t>(42);
  w.put_string("hello");
  ASSERT_TRUE(detail::send_frame(sv[0], w.bytes()));
  std::string big(100000, 'x');
  std::thread t([&] { EXPECT_TRUE(detail::send_frame(sv[0], big)); });
  auto f1 = detail::recv_frame(sv[1]);
  ASSERT_TRUE(f1);
  detail::ByteReader r(*f1);
  EXPECT_EQ(r.get<uint64_t>(), 42u);
  EXPECT_EQ(r.get_string(), "hello");
  EXPECT_TRUE(r.done());
  auto f2 = detail::recv_frame(sv[1]);
  t.join();
  ASSERT_TRUE(f2);
  EXPECT_EQ(*f2, big);
  ::close(sv[0]);
  EXPECT_FALSE(detail::recv_frame(sv[1]));  // end of stream
  ::close(sv[1]);
}

TEST(Wire, SendToClosedPeerReturnsFalseWithoutSigpipe) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ::close(sv[1]);
  EXPECT_FALSE(detail::send_frame(sv[0], "x"));  // would kill the test with SIGPIPE otherwise
  ::close(sv[0]);
}

TEST(Wire, TruncatedMessageThrows) {
  detail::ByteReader r(std::string_view("abc", 3));
  EXPECT_THROW(r.get<uint64_t>(), Error);
}

TEST(ShmSegment, CreateOpenUnlinkLeavesNothing) {
  const auto name = detail::segment_name(::getpid(), 999999, 0, 1);
  {
    auto w = detail::create_segment(name, 8192, "test");
    std::memset(w->data(), 7, 8192);
    EXPECT_EQ(testing::own_segments().size(), 1u);
    auto r = detail::open_and_unlink_segment(name, 8192);
    EXPECT_TRUE(testing::own_segments().empty());  // name gone, memory still mapped
    EXPECT_EQ(static_cast<unsigned char*>(r->data())[8191], 7);
  }
  EXPECT_TRUE(testing::own_segments().empty());
}

TEST(ShmSegment, UnlinkByPrefixRemovesLeftovers) {
  for (int i = 0; i < 3; ++i) detail::create_segment(detail::segment_name(::getpid(), 888888, i, 0), 64, "test");
  EXPECT_EQ(testing::own_segments().size(), 3u);
  EXPECT_EQ(detail::unlink_segments_with_prefix(detail::segment_prefix(::getpid(), 888888)), 3u);
  EXPECT_TRUE(testing::own_segments().empty());
}

TEST(ShmSegment, NoSpaceIsAClearErrorNotSigbus) {
  // A file-size limit makes tmpfs refuse the reservation as a full /dev/shm would.
  pid_t pid = ::fork();
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    int code = 3;
    try {
      detail::create_segment(detail::segment_name(::getppid(), 777777, 1, 0), 8 << 20, "DataLoader worker 1");
    } catch (const Error& e) {
      code = std::strstr(e.what(), "DataLoader worker 1: /dev/shm has no space for a 8.0 MB batch") ? 0 : 4;
    }
    ::_exit(code);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st)) << "child died of signal " << WTERMSIG(st);
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_TRUE(testing::own_segments().empty());
}

TEST(WorkerProcess, EchoesAndExitsOnEndOfStream) {
  auto w = WorkerProcess::spawn([](int fd) {
    while (auto f = detail::recv_frame(fd)) detail::send_frame(fd, *f + "!");
  });
  ASSERT_TRUE(detail::send_frame(w->fd(), "ping"));
  auto r = detail::recv_frame(w->fd());
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, "ping!");
  w->close_socket();
  ASSERT_TRUE(w->wait_exit(2000));
  ASSERT_TRUE(w->status());
  EXPECT_TRUE(WIFEXITED(*w->status()));
  EXPECT_EQ(WEXITSTATUS(*w->status()), 0);
}

TEST(WorkerProcess, KilledWorkerIsDescribedWithSignal) {
  auto w = WorkerProcess::spawn([](int fd) { ::pause(); });
  w->kill_now();
  EXPECT_FALSE(detail::recv_frame(w->fd()));  // its end closed when it died
  ASSERT_TRUE(w->wait_exit(2000));
  EXPECT_EQ(WorkerProcess::describe_status(*w->status()), "was killed by signal 9 (SIGKILL)");
}

TEST(WorkerProcess, StuckWorkerIsKilledAndReapedOnTerminate) {
  auto w = WorkerProcess::spawn([](int) {
    std::signal(SIGTERM, SIG_IGN);
    for (;;) ::pause();
  });
  pid_t pid = w->pid();
  w->terminate(50);
  ASSERT_TRUE(w->status());
  EXPECT_TRUE(WIFSIGNALED(*w->status()));
  for (pid_t c : testing::child_pids()) EXPECT_NE(c, pid);
}

TEST(WorkerProcess, SiblingsDoNotHoldEachOthersSockets) {
  // If the second child inherited the first one's parent-side socket, killing the first would
  // not end its stream.
  auto a = WorkerProcess::spawn([](int) { ::pause(); });
  auto b = WorkerProcess::spawn([](int) { ::pause(); });
  a->kill_now();
  EXPECT_FALSE(detail::recv_frame(a->fd()));
  a->terminate(0);
  b->terminate(0);
  EXPECT_TRUE(testing::child_pids().empty());
}

TEST(WorkerProcess, EscapingExceptionExitsWithCodeOne) {
  auto w = WorkerProcess::spawn([](int) { throw std::runtime_error("boom"); });
  ASSERT_TRUE(w->wait_exit(2000));
  EXPECT_EQ(WorkerProcess::describe_status(*w->status()), "exited unexpectedly with code 1");
}

}  // namespace
}  // namespace ember::data
