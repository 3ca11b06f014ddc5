// Tensor-free DataLoader machinery: frames (and descriptors) over sockets, nameless
// shared-memory buffers, and forked workers that are always reaped.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <thread>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/detail/shm_segment.h"
#include "data/detail/wire.h"
#include "data/detail/worker_process.h"
#include "tests/data/test_util.h"
#include "tests/support/error_text.h"

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

// Regression (fuzz/corpus/dataloader_wire/crash_*): a frame header announcing 2^56 bytes made
// recv_frame allocate them before reading (std::length_error, or an allocation failure).
TEST(Wire, AnnouncedLengthCostsOnlyTheBytesThatArrive) {
  auto frame_with_header = [](uint64_t announced, size_t sent) {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    std::string bytes(reinterpret_cast<const char*>(&announced), sizeof announced);
    bytes += std::string(sent, 'x');
    EXPECT_EQ(::write(sv[0], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    ::close(sv[0]);
    return sv[1];
  };
  // Announced but never sent: the end of stream, no allocation of the announced size.
  int fd = frame_with_header(detail::kMaxFrameBytes, 1000);
  EXPECT_FALSE(detail::recv_frame(fd).has_value());
  ::close(fd);
  // Over the limit: an ember::Error naming the length.
  fd = frame_with_header(uint64_t{1} << 56, 10);
  const std::string err = support::error_of<Error>([&] { detail::recv_frame(fd); });
  EXPECT_NE(err.find("72057594037927936 bytes"), std::string::npos) << err;
  ::close(fd);
  // A frame longer than the first 64 KiB step still arrives whole.
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::string big(300000, 'y');
  big[299999] = 'z';
  std::thread writer([&] { EXPECT_TRUE(detail::send_frame(sv[0], big)); });
  auto got = detail::recv_frame(sv[1]);
  writer.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, big);
  ::close(sv[0]);
  ::close(sv[1]);
}

size_t open_fd_count() {
  size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

TEST(Wire, DescriptorTravelsWithItsFrame) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  detail::SharedBuffer b = detail::create_shared_buffer(8192, "test");
  std::memset(b.mapping->data(), 7, 8192);
  ASSERT_TRUE(detail::send_frame(sv[0], "small", b.fd.get()));
  ASSERT_TRUE(detail::send_frame(sv[0], std::string(100000, 'x'), b.fd.get()));  // header and payload apart
  ASSERT_TRUE(detail::send_frame(sv[0], "no descriptor"));
  for (int i = 0; i < 2; ++i) {
    io::UniqueFd got;
    auto f = detail::recv_frame(sv[1], &got);
    ASSERT_TRUE(f);
    ASSERT_TRUE(got.valid()) << "frame " << i;
    EXPECT_NE(got.get(), b.fd.get());
    auto m = detail::map_shared_buffer(got.get(), 8192);
    EXPECT_EQ(static_cast<unsigned char*>(m->data())[8191], 7);
  }
  io::UniqueFd none;
  auto f3 = detail::recv_frame(sv[1], &none);
  ASSERT_TRUE(f3);
  EXPECT_EQ(*f3, "no descriptor");
  EXPECT_FALSE(none.valid());
  // A descriptor nobody asked for is closed, not leaked.
  const size_t before = open_fd_count();
  ASSERT_TRUE(detail::send_frame(sv[0], "unwanted", b.fd.get()));
  EXPECT_EQ(*detail::recv_frame(sv[1]), "unwanted");
  EXPECT_EQ(open_fd_count(), before);
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(SharedBuffer, IsAMemfdAndLivesAsLongAsAMapping) {
  std::unique_ptr<detail::ShmMapping> reader;
  {
    detail::SharedBuffer b = detail::create_shared_buffer(8192, "test");
    std::memset(b.mapping->data(), 7, 8192);
    reader = detail::map_shared_buffer(b.fd.get(), 8192);
    EXPECT_EQ(testing::batch_mappings(), 2u);  // counts "/memfd:ember_dl_batch" mappings only
  }
  EXPECT_EQ(testing::batch_mappings(), 1u);  // descriptor and creator's mapping gone
  EXPECT_EQ(static_cast<unsigned char*>(reader->data())[8191], 7);
  reader.reset();
  EXPECT_EQ(testing::batch_mappings(), 0u);
}

TEST(SharedBuffer, ShorterThanClaimedIsAnErrorNotSigbus) {
  detail::SharedBuffer b = detail::create_shared_buffer(4096, "test");
  const std::string err = support::error_of<Error>([&] { detail::map_shared_buffer(b.fd.get(), 1 << 20); });
  EXPECT_NE(err.find("sent a 4096-byte batch buffer for a 1048576-byte batch"),
            std::string::npos)
      << err;
}

TEST(SharedBuffer, NoSpaceIsAClearErrorNotSigbus) {
  // A file-size limit makes the kernel refuse the reservation as exhausted memory would.
  pid_t pid = ::fork();
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    int code = 3;
    try {
      detail::create_shared_buffer(8 << 20, "DataLoader worker 1");
    } catch (const Error& e) {
      code = std::strstr(e.what(), "DataLoader worker 1: no shared memory left for a 8.0 MB batch") ? 0 : 4;
    }
    ::_exit(code);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st)) << "child died of signal " << WTERMSIG(st);
  EXPECT_EQ(WEXITSTATUS(st), 0);
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
