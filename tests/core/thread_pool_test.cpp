// Thread pool: coverage of every index, chunking limits, exceptions, nesting, concurrent
// callers and fork safety. No timing assertions.
#include "core/thread_pool.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace ember {
namespace {

// Runs parallel_for over [begin, end) and checks that every index was visited exactly once.
void expect_covers_once(int64_t begin, int64_t end, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(end > begin ? end - begin : 0));
  parallel_for(begin, end, grain, [&](int64_t lo, int64_t hi) {
    ASSERT_LE(begin, lo);
    ASSERT_LE(lo, hi);
    ASSERT_LE(hi, end);
    for (int64_t i = lo; i < hi; ++i) hits[static_cast<size_t>(i - begin)].fetch_add(1);
  });
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << begin + int64_t(i);
}

class ThreadPool : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = get_num_threads(); }
  void TearDown() override { set_num_threads(saved_); }
  int saved_ = 1;
};

TEST_F(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 4, 8}) {
    set_num_threads(threads);
    expect_covers_once(0, 0, 1);
    expect_covers_once(5, 5, 1);
    expect_covers_once(0, 1, 1);
    expect_covers_once(0, 7, 1);
    expect_covers_once(-50, 50, 3);
    expect_covers_once(0, 100000, 1000);
    expect_covers_once(3, 100003, 0);  // grain 0 is treated as 1
  }
}

TEST_F(ThreadPool, EmptyRangeDoesNotCallF) {
  set_num_threads(4);
  int calls = 0;
  parallel_for(10, 10, 1, [&](int64_t, int64_t) { ++calls; });
  parallel_for(10, 3, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST_F(ThreadPool, RangeBelowGrainRunsInlineAsOneChunk) {
  set_num_threads(4);
  std::vector<std::pair<int64_t, int64_t>> chunks;
  std::thread::id caller = std::this_thread::get_id(), ran_on;
  parallel_for(0, 100, 100, [&](int64_t lo, int64_t hi) {
    chunks.emplace_back(lo, hi);
    ran_on = std::this_thread::get_id();
  });
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0], std::make_pair(int64_t{0}, int64_t{100}));
  EXPECT_EQ(ran_on, caller);
}

TEST_F(ThreadPool, ChunksRespectThreadCountAndGrain) {
  set_num_threads(4);
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  parallel_for(0, 1000, 10, [&](int64_t lo, int64_t hi) {
    std::lock_guard<std::mutex> lock(mu);
    chunks.emplace_back(lo, hi);
  });
  EXPECT_LE(chunks.size(), 4u);
  EXPECT_GE(chunks.size(), 1u);
  for (auto [lo, hi] : chunks) EXPECT_GE(hi - lo, 10);

  chunks.clear();
  parallel_for(0, 25, 10, [&](int64_t lo, int64_t hi) {  // at most ceil(25 / 10) = 3 chunks
    std::lock_guard<std::mutex> lock(mu);
    chunks.emplace_back(lo, hi);
  });
  EXPECT_LE(chunks.size(), 3u);
}

TEST_F(ThreadPool, UsesMoreThanOneThreadWhenAsked) {
  set_num_threads(4);
  // Each chunk waits (bounded) until another chunk has started, so a pool that runs the
  // chunks one after another on a single thread would leave `saw_other` false.
  std::atomic<int> started{0};
  std::atomic<bool> saw_other{false};
  parallel_for(0, 4, 1, [&](int64_t, int64_t) {
    started.fetch_add(1);
    for (int spin = 0; spin < 2000000 && started.load() < 2; ++spin) std::this_thread::yield();
    if (started.load() >= 2) saw_other = true;
  });
  EXPECT_TRUE(saw_other.load());
}

TEST_F(ThreadPool, FirstExceptionPropagatesAndPoolStaysUsable) {
  set_num_threads(4);
  EXPECT_THROW(parallel_for(0, 1000, 1,
                            [&](int64_t lo, int64_t hi) {
                              for (int64_t i = lo; i < hi; ++i)
                                if (i == 777) throw ValueError("index 777");
                            }),
               ValueError);
  EXPECT_THROW(parallel_for(0, 1000, 1, [&](int64_t, int64_t) { throw std::runtime_error("every chunk"); }),
               std::runtime_error);
  // Inline path too.
  EXPECT_THROW(parallel_for(0, 5, 100, [&](int64_t, int64_t) { throw IndexError("inline"); }), IndexError);
  expect_covers_once(0, 10000, 10);
}

// A worker held in a signal handler stands for one the scheduler has not run yet.
std::atomic<bool> g_hold_worker{false};
std::atomic<bool> g_worker_held{false};
void hold_worker(int) {
  g_worker_held = true;
  const timespec ms{0, 1000000};
  while (g_hold_worker.load()) nanosleep(&ms, nullptr);
  g_worker_held = false;
}

pid_t current_tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// True when thread `tid` of this process sits in the futex syscall (202 on x86-64; other
// architectures: any blocked state), i.e. the idle worker waiting on its condition variable.
bool blocked_in_wait(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/syscall");
  std::string nr;
  f >> nr;
#if defined(__x86_64__)
  return nr == "202";
#else
  return !nr.empty() && nr != "running";
#endif
}

// Regression (issue 20: clip_grad_norm_ took longer on 2 threads than on 1 on a busy machine):
// the caller waited until every worker had woken and checked in, even when it had run every
// chunk itself because the worker was not scheduled yet. With the only worker held, the loop
// must finish on the caller alone. The watchdog bounds the wait of the old behaviour (it would
// return only once the worker is released) and is no timing assertion.
TEST_F(ThreadPool, CallerDoesNotWaitForAWorkerThatHasNotWoken) {
  set_num_threads(2);
  const pid_t caller = current_tid();
  std::atomic<pid_t> worker{0};
  for (int attempt = 0; attempt < 100 && worker.load() == 0; ++attempt) {
    parallel_for(0, 2, 1, [&](int64_t, int64_t) {
      if (current_tid() != caller) {
        worker = current_tid();
        return;
      }
      for (int spin = 0; spin < 200000 && worker.load() == 0; ++spin) std::this_thread::yield();
    });
  }
  ASSERT_NE(worker.load(), 0) << "no chunk ran on the pool's worker";
  bool idle = false;
  for (int i = 0; i < 10000 && !idle; ++i) {
    idle = blocked_in_wait(worker.load());
    if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(idle) << "the worker never went back to waiting";

  struct sigaction sa {}, old {};
  sa.sa_handler = hold_worker;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &sa, &old), 0);
  g_hold_worker = true;
  ASSERT_EQ(syscall(SYS_tgkill, getpid(), worker.load(), SIGUSR2), 0);
  for (int i = 0; i < 100000 && !g_worker_held.load(); ++i) std::this_thread::yield();
  ASSERT_TRUE(g_worker_held.load());

  std::mutex mu;
  std::condition_variable cv;
  bool done = false, watchdog_fired = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(60), [&] { return done; })) {
      watchdog_fired = true;
      g_hold_worker = false;
    }
  });
  std::atomic<int> chunks_on_caller{0}, chunks{0};
  parallel_for(0, 2, 1, [&](int64_t, int64_t) {
    chunks.fetch_add(1);
    if (current_tid() == caller) chunks_on_caller.fetch_add(1);
  });
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_one();
  watchdog.join();
  g_hold_worker = false;
  for (int i = 0; i < 100000 && g_worker_held.load(); ++i) std::this_thread::yield();
  sigaction(SIGUSR2, &old, nullptr);
  EXPECT_FALSE(watchdog_fired) << "parallel_for waited for the held worker";
  EXPECT_EQ(chunks.load(), 2);
  EXPECT_EQ(chunks_on_caller.load(), 2);
  expect_covers_once(0, 100000, 1000);  // the released worker takes part again
}

TEST_F(ThreadPool, NestedCallsRunInlineAndComplete) {
  set_num_threads(4);
  constexpr int64_t kOuter = 16, kInner = 1000;
  std::vector<std::atomic<int>> hits(kOuter * kInner);
  std::atomic<bool> nested_was_inline{true};
  parallel_for(0, kOuter, 1, [&](int64_t lo, int64_t hi) {
    EXPECT_TRUE(in_parallel_region());
    for (int64_t o = lo; o < hi; ++o) {
      std::thread::id me = std::this_thread::get_id();
      parallel_for(0, kInner, 1, [&](int64_t ilo, int64_t ihi) {
        if (std::this_thread::get_id() != me) nested_was_inline = false;
        for (int64_t i = ilo; i < ihi; ++i) hits[static_cast<size_t>(o * kInner + i)].fetch_add(1);
      });
    }
  });
  EXPECT_FALSE(in_parallel_region());
  EXPECT_TRUE(nested_was_inline.load());
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST_F(ThreadPool, TwoUserThreadsAtOnceBothComplete) {
  set_num_threads(4);
  auto work = [](int64_t* out) {
    for (int rep = 0; rep < 200; ++rep) {
      std::atomic<int64_t> sum{0};
      parallel_for(0, 10000, 16, [&](int64_t lo, int64_t hi) {
        int64_t s = 0;
        for (int64_t i = lo; i < hi; ++i) s += i;
        sum.fetch_add(s);
      });
      if (sum.load() != 10000LL * 9999 / 2) {
        *out = sum.load();
        return;
      }
    }
    *out = 10000LL * 9999 / 2;
  };
  int64_t a = 0, b = 0;
  std::thread ta(work, &a), tb(work, &b);
  ta.join();
  tb.join();
  EXPECT_EQ(a, 10000LL * 9999 / 2);
  EXPECT_EQ(b, 10000LL * 9999 / 2);
}

TEST_F(ThreadPool, SetNumThreadsWhileAnotherThreadUsesPool) {
  set_num_threads(4);
  std::atomic<bool> stop{false};
  std::atomic<bool> ok{true};
  std::thread user([&] {
    while (!stop.load()) {
      std::atomic<int64_t> n{0};
      parallel_for(0, 5000, 8, [&](int64_t lo, int64_t hi) { n.fetch_add(hi - lo); });
      if (n.load() != 5000) ok = false;
    }
  });
  for (int i = 0; i < 50; ++i) set_num_threads(1 + i % 4);
  stop = true;
  user.join();
  EXPECT_TRUE(ok.load());
}

TEST_F(ThreadPool, SetNumThreadsValidates) {
  EXPECT_THROW(set_num_threads(0), ValueError);
  EXPECT_THROW(set_num_threads(-3), ValueError);
  set_num_threads(3);
  EXPECT_EQ(get_num_threads(), 3);
}

// Parent uses the pool (so its workers exist), then the child, which inherits none of those
// threads, must still be able to run parallel loops.
int run_in_child(const std::function<bool()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    bool ok = false;
    try {
      ok = body();
    } catch (...) {
      ok = false;
    }
    _exit(ok ? 0 : 1);
  }
  EXPECT_GT(pid, 0) << "fork failed";
  if (pid <= 0) return -1;
  // A child stuck on the parent's dead workers would hang: give up after 60 s and kill it.
  int status = 0;
  for (int waited_ms = 0;; waited_ms += 10) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 || waited_ms >= 60000) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "child " << pid << " did not exit (hung?)";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

bool sum_check(int64_t n, int64_t grain) {
  std::atomic<int64_t> sum{0};
  std::atomic<int> chunks{0};
  parallel_for(0, n, grain, [&](int64_t lo, int64_t hi) {
    chunks.fetch_add(1);
    int64_t s = 0;
    for (int64_t i = lo; i < hi; ++i) s += i;
    sum.fetch_add(s);
  });
  return sum.load() == n * (n - 1) / 2;
}

TEST_F(ThreadPool, ChildAfterForkRecreatesPool) {
  set_num_threads(4);
  ASSERT_TRUE(sum_check(100000, 100));
  int rc = run_in_child([] {
    set_num_threads(2);
    for (int rep = 0; rep < 20; ++rep)
      if (!sum_check(100000, 100)) return false;
    return true;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(sum_check(100000, 100));  // the parent's pool is unaffected
}

TEST_F(ThreadPool, ChildAfterForkWorksWithoutSetNumThreads) {
  set_num_threads(3);
  ASSERT_TRUE(sum_check(50000, 10));
  int rc = run_in_child([] { return get_num_threads() == 3 && sum_check(50000, 10) && sum_check(50000, 10); });
  EXPECT_EQ(rc, 0);
}

TEST_F(ThreadPool, ForkWhileAnotherThreadIsInsideParallelFor) {
  set_num_threads(4);
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop.load()) sum_check(20000, 10);
  });
  int failures = 0;
  for (int i = 0; i < 5; ++i) {
    int rc = run_in_child([] {
      set_num_threads(2);
      return sum_check(100000, 100) && sum_check(100000, 100);
    });
    if (rc != 0) ++failures;
  }
  stop = true;
  busy.join();
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace ember
