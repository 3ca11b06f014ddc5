// DataLoader failures: worker exceptions, killed workers, timeouts, early exits, and full
// shared memory. After each, no child process and no mapped batch buffer may remain.
#include <gtest/gtest.h>

#include <algorithm>

#include <chrono>
#include <csignal>
#include <regex>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>

#include "core/ops/factory.h"
#include "data/dataloader.h"
#include "data/detail/shm_segment.h"
#include "data/detail/wire.h"
#include "data/detail/worker_reply.h"
#include "data/worker_info.h"
#include "tests/data/test_util.h"
#include "tests/support/error_text.h"

namespace ember::data {
namespace {

using testing::child_pids;
using testing::eventually;
using testing::batch_mappings;

int64_t ints_first(const Tensor& t) { return t.to_vector<int64_t>()[0]; }

void expect_clean() {
  EXPECT_TRUE(child_pids().empty()) << child_pids().size() << " child processes left";
  EXPECT_EQ(batch_mappings(), 0u) << "batch buffers still mapped";
}

// Sample i is i, except the planted failures.
struct Faulty : Dataset<Tensor> {
  enum Mode { kNone, kThrowAt, kKillAt, kSleepAt } mode = kNone;
  size_t at = 0;
  Tensor get(size_t i) override {
    if (i == at && mode == kThrowAt) EMBER_THROW(ValueError, "bad sample ", i);
    if (i == at && mode == kKillAt) ::raise(SIGKILL);
    if (i == at && mode == kSleepAt) std::this_thread::sleep_for(std::chrono::seconds(3));
    return full({1024}, static_cast<double>(i), TensorOptions(kInt64));
  }
  size_t size() const override { return 16; }
};

std::shared_ptr<Faulty> faulty(Faulty::Mode m, size_t at) {
  auto d = std::make_shared<Faulty>();
  d->mode = m;
  d->at = at;
  return d;
}

// Iterates `loader` (batch b holds b) until it throws a ValueError; returns how many batches
// came first, and the error's text in *error (a test failure, and "", when nothing is thrown).
template <typename Loader>
int batches_before_value_error(Loader& loader, std::string* error) {
  int seen = 0;
  *error = support::error_of<ValueError>([&] {
    for (auto& b : loader) {
      EXPECT_EQ(ints_first(b), seen);
      ++seen;
    }
  });
  return seen;
}

TEST(DataLoaderFailure, WorkerExceptionNamesWorkerAndPidAndKeepsItsType) {
  // batch_size 1: sample 5 is batch 5, made by worker 5 % 2 = 1.
  DataLoader loader(faulty(Faulty::kThrowAt, 5), DataLoaderOptions{.num_workers = 2});
  std::string msg;
  const int seen = batches_before_value_error(loader, &msg);
  EXPECT_TRUE(std::regex_search(msg, std::regex("^DataLoader worker 1 \\(pid [0-9]+\\) raised: bad sample 5"))) << msg;
  EXPECT_EQ(seen, 5);
  expect_clean();
}

// The worker's error crosses the socket with its check's location: the parent's error has the
// same where() (Note [Error messages] in core/error.h), its message() no location in it.
TEST(DataLoaderFailure, WorkerExceptionKeepsItsCheckLocation) {
  DataLoader loader(faulty(Faulty::kThrowAt, 2), DataLoaderOptions{.num_workers = 1});
  try {
    for (auto& b : loader) (void)b;
    ADD_FAILURE() << "no exception";
  } catch (const ValueError& e) {
    EXPECT_EQ(e.where().rfind("tests/data/dataloader_failure_test.cpp:", 0), 0u) << e.where();
    EXPECT_TRUE(std::regex_search(e.message(), std::regex("^DataLoader worker 0 \\(pid [0-9]+\\) raised: bad sample 2$")))
        << e.message();
  }
  expect_clean();
}

TEST(DataLoaderFailure, IteratorContinuesAfterACaughtWorkerException) {
  DataLoader loader(faulty(Faulty::kThrowAt, 2), DataLoaderOptions{.num_workers = 2});
  auto it = loader.begin();
  EXPECT_EQ(ints_first(*it), 0);
  ++it;
  EXPECT_THROW(++it, ValueError);  // batch 2
  ++it;                             // PyTorch semantics: the failed batch is skipped
  EXPECT_EQ(ints_first(*it), 3);
}

TEST(DataLoaderFailure, KilledWorkerIsReportedWithPidAndSignal) {
  DataLoader loader(faulty(Faulty::kKillAt, 3), DataLoaderOptions{.num_workers = 2});
  const std::string msg = support::error_of<Error>([&] { for (auto& b : loader) (void)b; });
  EXPECT_TRUE(std::regex_search(
      msg, std::regex("^DataLoader worker 1 \\(pid [0-9]+\\) was killed by signal 9 \\(SIGKILL\\)")))
      << msg;
  expect_clean();
}

TEST(DataLoaderFailure, TimeoutRaisesTimeoutError) {
  DataLoader loader(faulty(Faulty::kSleepAt, 1), DataLoaderOptions{.num_workers = 2, .timeout_ms = 200});
  auto t0 = std::chrono::steady_clock::now();
  const std::string err = support::error_of<TimeoutError>([&] { for (auto& b : loader) (void)b; });
  EXPECT_NE(err.find("timed out after 200 ms waiting for batch 1 from DataLoader worker 1"),
            std::string::npos)
      << err;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2900));
  expect_clean();
}

TEST(DataLoaderFailure, DroppingTheIteratorEarlyReapsWorkersAndSegments) {
  DataLoader loader(faulty(Faulty::kNone, 0), DataLoaderOptions{.batch_size = 2, .num_workers = 3,
                                                                .prefetch_factor = 3});
  for (auto& b : loader) {
    EXPECT_EQ(child_pids().size(), 3u);
    // Let the workers fill the pipeline so segments are in flight when we leave.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    (void)b;
    break;
  }
  expect_clean();
}

TEST(DataLoaderFailure, ExceptionInTheTrainingLoopReapsEverything) {
  DataLoader loader(faulty(Faulty::kNone, 0), DataLoaderOptions{.batch_size = 2, .num_workers = 2});
  EXPECT_THROW(
      {
        for (auto& b : loader) {
          (void)b;
          throw std::runtime_error("loss is NaN");
        }
      },
      std::runtime_error);
  expect_clean();
}

TEST(DataLoaderFailure, WorkerInitFnExceptionIsReported) {
  DataLoaderOptions o{.num_workers = 2};
  o.worker_init_fn = [](int id) {
    if (id == 0) EMBER_THROW(Error, "cannot open shard");
  };
  DataLoader loader(faulty(Faulty::kNone, 0), o);
  const std::string err = support::error_of<Error>([&] { for (auto& b : loader) (void)b; });
  EXPECT_TRUE(std::regex_search(err,
                                std::regex("^DataLoader worker 0 \\(pid [0-9]+\\) raised: worker_init_fn: cannot "
                                           "open shard")))
      << err;
  expect_clean();
}

TEST(DataLoaderFailure, FullSharedMemoryIsAClearErrorNotSigbus) {
  // A file-size limit in the worker makes the kernel refuse the batch as full memory would.
  DataLoaderOptions o{.batch_size = 8, .num_workers = 1};
  o.worker_init_fn = [](int) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &lim);
  };
  DataLoader loader(faulty(Faulty::kNone, 0), o);
  const std::string err = support::error_of<Error>([&] { for (auto& b : loader) (void)b; });
  EXPECT_NE(err.find("DataLoader worker 0: no shared memory left for a 0.1 MB batch"),
            std::string::npos)
      << err;
  expect_clean();
}

TEST(DataLoaderFailure, CtrlCInAWorkerIsLeftToTheParent) {
  // Ctrl-C signals the whole process group; a worker must not die of it mid-epoch.
  struct Interrupting : Dataset<int64_t> {
    int64_t get(size_t i) override {
      if (get_worker_info()) ::raise(SIGINT);
      return static_cast<int64_t>(i);
    }
    size_t size() const override { return 4; }
  };
  DataLoader loader(std::make_shared<Interrupting>(), DataLoaderOptions{.num_workers = 2});
  int n = 0;
  for (auto& b : loader) {
    (void)b;
    ++n;
  }
  EXPECT_EQ(n, 4);
  expect_clean();
}

TEST(DataLoaderFailure, PersistentLoaderRecoversAfterAWorkerDied) {
  auto ds = faulty(Faulty::kKillAt, 3);
  DataLoader loader(ds, DataLoaderOptions{.num_workers = 2, .persistent_workers = true});
  EXPECT_THROW(
      {
        for (auto& b : loader) (void)b;
      },
      Error);
  EXPECT_TRUE(child_pids().empty());
  ds->mode = Faulty::kNone;  // the next epoch forks fresh workers from the parent's dataset
  int n = 0;
  for (auto& b : loader) {
    (void)b;
    ++n;
  }
  EXPECT_EQ(n, 16);
}

// The worker's end of its socket, found from inside the worker (the only AF_UNIX stream socket
// a worker has: WorkerProcess::spawn closes its siblings'), so a test can forge a reply on it.
int worker_socket() {
  for (int fd = 3; fd < 1024; ++fd) {
    struct stat st {};
    int domain = 0;
    socklen_t len = sizeof domain;
    if (::fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
        ::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_UNIX)
      return fd;
  }
  return -1;
}

// A worker whose inline batch (Note [Inline batches]) announces 64 bytes and sends 10, and one
// that announces a batch too large to come inline without attaching its buffer: ValueErrors
// naming the worker and what arrived; the loader stays failed and nothing is left behind.
TEST(DataLoaderFailure, InlineBatchOfTheWrongSizeIsValueErrorNamingTheWorker) {
  for (const bool too_large : {false, true}) {
    SCOPED_TRACE(too_large ? "too large to come inline" : "wrong payload size");
    struct Forging : Dataset<Tensor> {
      bool too_large = false;
      Tensor get(size_t i) override {
        if (i == 3 && get_worker_info()) {
          Tensor t = zeros({8}, TensorOptions(kInt64));
          const uint64_t bytes = too_large ? (uint64_t{1} << 20) : 64;
          std::string frame = detail::batch_reply(/*id=*/3, bytes, {t}, {0}, std::string("\x01", 1));
          detail::send_frame(worker_socket(), frame);
          if (!too_large) detail::send_frame(worker_socket(), std::string(10, 'x'));
        }
        return full({4}, static_cast<double>(i), TensorOptions(kInt64));
      }
      size_t size() const override { return 8; }
    };
    auto ds = std::make_shared<Forging>();
    ds->too_large = too_large;
    DataLoader loader(ds, DataLoaderOptions{.num_workers = 2});
    std::string msg;
    batches_before_value_error(loader, &msg);
    const std::string what = too_large ? "a 1048576-byte batch without its buffer" : "a 64-byte batch followed by 10 bytes";
    EXPECT_TRUE(std::regex_search(msg, std::regex("^DataLoader worker 1 \\(pid [0-9]+\\) sent a bad reply: " + what)))
        << msg;
  }
  expect_clean();
}

// A worker whose reply describes a tensor (1024 int64, 8 KiB) in a 4 KiB batch buffer: the
// parent once built a tensor viewing past its mapping from whatever sizes and offsets arrived
// (a worker's n * 8 overflowing does the same). It must be a ValueError naming the worker and
// what arrived, the loader must stay failed, and nothing may be left behind.
TEST(DataLoaderFailure, WorkerReplyWithATensorOutsideItsBufferIsValueErrorNamingTheWorker) {
  struct Forging : Dataset<Tensor> {
    Tensor get(size_t i) override {
      if (i == 3 && get_worker_info()) {
        detail::SharedBuffer buf = detail::create_shared_buffer(4096, "forger");
        buf.mapping.reset();
        Tensor lie = zeros({1024}, TensorOptions(kInt64));
        std::string frame = detail::batch_reply(/*id=*/3, 4096, {lie}, {0}, std::string("\x01", 1));
        detail::send_frame(worker_socket(), frame, buf.fd.get());
      }
      return full({4}, static_cast<double>(i), TensorOptions(kInt64));
    }
    size_t size() const override { return 8; }
  };
  DataLoader loader(std::make_shared<Forging>(), DataLoaderOptions{.num_workers = 2});
  std::string msg;
  const int seen = batches_before_value_error(loader, &msg);
  EXPECT_TRUE(std::regex_search(
      msg, std::regex("^DataLoader worker 1 \\(pid [0-9]+\\) sent a bad reply: tensor 0 \\(int64, shape \\[1024\\], "
                      "8192 bytes at offset 0\\) does not lie inside the 4096-byte batch buffer")))
      << msg;
  EXPECT_LE(seen, 3);  // the parent reads every worker's frames while it waits, so it may fail sooner
  expect_clean();
}

// Issue 19, 6(a): a parent killed mid-epoch (by any signal, SIGKILL included) left 3-4 named
// /dev/shm/ember_dl_* segments behind, because only the parent could unlink them. A real
// child process runs a 3-worker loader with batches in flight and is killed; afterwards
// /dev/shm holds no new ember entry, and every worker has exited on its own.
class KilledLoaderParent : public ::testing::TestWithParam<int> {};

TEST_P(KilledLoaderParent, LeavesNothingInDevShmAndNoWorkers) {
  const int signo = GetParam();
  // Orphaned workers come to us, so we can see them exit and reap them.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int pids_pipe[2];
  ASSERT_EQ(::pipe(pids_pipe), 0);
  // Left by earlier processes (before issue 19 the batches had names): a reused pid matches them.
  const std::vector<std::string> stale = testing::ember_devshm_entries_of(0);
  const pid_t parent = ::fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    ::close(pids_pipe[0]);
    struct Big : Dataset<Tensor> {
      Tensor get(size_t i) override { return full({32768}, static_cast<double>(i), TensorOptions(kInt64)); }
      size_t size() const override { return 64; }
    };
    DataLoader loader(std::make_shared<Big>(), DataLoaderOptions{.num_workers = 3, .prefetch_factor = 2});
    std::vector<Tensor> held;
    for (auto& b : loader) {
      held.push_back(b);  // mapped batches, and 6 more in flight behind them
      if (held.size() < 2) continue;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the pipeline fill
      const std::vector<pid_t> pids = testing::child_pids();  // the workers
      const size_t n = pids.size();
      if (::write(pids_pipe[1], &n, sizeof n) != sizeof n) ::_exit(3);
      if (::write(pids_pipe[1], pids.data(), n * sizeof(pid_t)) != static_cast<ssize_t>(n * sizeof(pid_t))) ::_exit(3);
      for (;;) ::pause();  // killed here, mid-epoch
    }
    ::_exit(4);
  }
  ::close(pids_pipe[1]);
  size_t n = 0;
  ASSERT_EQ(::read(pids_pipe[0], &n, sizeof n), static_cast<ssize_t>(sizeof n));
  std::vector<pid_t> workers(n);
  ASSERT_EQ(::read(pids_pipe[0], workers.data(), n * sizeof(pid_t)), static_cast<ssize_t>(n * sizeof(pid_t)));
  ::close(pids_pipe[0]);
  EXPECT_EQ(n, 3u);
  ASSERT_EQ(::kill(parent, signo), 0);
  int st = 0;
  ASSERT_EQ(::waitpid(parent, &st, 0), parent);
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == signo) << "wait status " << st;
  // Workers see end of stream and leave; generous bound, only to turn a hang into a failure.
  for (pid_t w : workers) {
    bool reaped = false;
    for (int i = 0; i < 3000 && !reaped; ++i) {
      reaped = ::waitpid(w, &st, WNOHANG) == w || (::kill(w, 0) != 0 && errno == ESRCH);
      if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(reaped) << "worker " << w << " still running 30 s after its parent died";
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  std::vector<std::string> left;
  for (const std::string& name : testing::ember_devshm_entries_of(parent)) {
    if (std::find(stale.begin(), stale.end(), name) == stale.end()) left.push_back(name);
  }
  EXPECT_TRUE(left.empty()) << left.size() << " new entries, the first /dev/shm/" << left.front();
}

INSTANTIATE_TEST_SUITE_P(Signals, KilledLoaderParent, ::testing::Values(SIGKILL, SIGTERM, SIGINT),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string("SIG") + ::sigabbrev_np(info.param);
                         });

}  // namespace
}  // namespace ember::data
