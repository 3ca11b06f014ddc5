// Tests of the caching allocator (core/allocator.h). Statistics are per device and live for
// the whole process, so every test uses its own CPU device index (noted next to the test) and
// the suite runs once per process (--gtest_repeat would see the previous run's numbers).
#include "core/allocator.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "core/ops/factory.h"
#include "core/tensor.h"
#include "tests/support/error_text.h"

// The detection core/allocator.cpp uses for Note [Poisoning in sanitizer builds].
#if defined(__SANITIZE_ADDRESS__)
#define EMBER_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMBER_TEST_ASAN 1
#endif
#endif
#if defined(EMBER_TEST_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace ember {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * 1024;

DataPtr alloc(int index, int64_t num_bytes) {
  return get_allocator(Device::cpu(index))->allocate(static_cast<size_t>(num_bytes));
}
char* at(const DataPtr& p) { return static_cast<char*>(p.get()); }

// Sets EMBER_MEMORY_LIMIT for the scope of a test and unsets it afterwards.
struct ScopedLimitEnv {
  explicit ScopedLimitEnv(const char* value) { setenv("EMBER_MEMORY_LIMIT", value, 1); }
  ~ScopedLimitEnv() { unsetenv("EMBER_MEMORY_LIMIT"); }
};

TEST(Allocator, ZeroBytesGivesNullPointerAndNoStats) {  // cpu:10
  DataPtr p = alloc(10, 0);
  EXPECT_EQ(p.get(), nullptr);
  EXPECT_EQ(p.device(), Device::cpu(10));
  MemoryStats s = memory_stats(Device::cpu(10));
  EXPECT_EQ(s.num_allocs, 0);
  EXPECT_EQ(s.reserved_bytes, 0);
  p.reset();  // no deleter: must not crash
}

TEST(Allocator, ReusesFreedBlockOfSameSize) {  // cpu:11
  void* first;
  {
    DataPtr p = alloc(11, 1000);
    ASSERT_NE(p.get(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.get()) % 64, 0u);
    std::memset(p.get(), 0xab, 1000);
    first = p.get();
  }
  const MemoryStats before = memory_stats(Device::cpu(11));
  DataPtr q = alloc(11, 1000);
  EXPECT_EQ(q.get(), first);
  const MemoryStats after = memory_stats(Device::cpu(11));
  EXPECT_EQ(after.reserved_bytes, before.reserved_bytes);
  EXPECT_EQ(after.num_segments, 1);
  EXPECT_EQ(after.num_allocs, 2);
  EXPECT_EQ(after.num_frees, 1);
}

TEST(Allocator, SplitHalvesMergeAndServeLargerRequest) {  // cpu:12
  const Device d = Device::cpu(12);
  DataPtr a = alloc(12, 512 * kKiB);
  DataPtr b = alloc(12, 512 * kKiB);
  // Both come from one 2 MiB small-pool segment, the second right after the first.
  EXPECT_EQ(at(b), at(a) + 512 * kKiB);
  EXPECT_EQ(memory_stats(d).reserved_bytes, 2 * kMiB);
  EXPECT_EQ(memory_stats(d).num_segments, 1);
  char* base = at(a);
  a.reset();
  b.reset();
  // The halves (and the 1 MiB tail) merged back into one 2 MiB block; a 1 MiB request fits it.
  DataPtr c = alloc(12, 1 * kMiB);
  EXPECT_EQ(at(c), base);
  EXPECT_EQ(memory_stats(d).reserved_bytes, 2 * kMiB);
  EXPECT_EQ(memory_stats(d).num_segments, 1);
  // A fully free segment goes back to the system on empty_cache; one in use stays.
  empty_cache(d);
  EXPECT_EQ(memory_stats(d).reserved_bytes, 2 * kMiB);
  c.reset();
  empty_cache(d);
  EXPECT_EQ(memory_stats(d).reserved_bytes, 0);
  EXPECT_EQ(memory_stats(d).num_segments, 0);
}

TEST(Allocator, MergeOnlyWithFreeNeighbours) {  // cpu:25
  const Device d = Device::cpu(25);
  DataPtr a = alloc(25, 512 * kKiB);
  DataPtr b = alloc(25, 512 * kKiB);
  DataPtr c = alloc(25, 512 * kKiB);
  char* pa = at(a);
  a.reset();
  c.reset();  // merges with the free 512 KiB tail -> 1 MiB free at the end
  // b is still in use: no 1.5 MiB free run exists, so a 1 MiB request takes the tail...
  DataPtr e = alloc(25, 1 * kMiB);
  EXPECT_EQ(at(e), pa + 1024 * kKiB);
  // ...and a second 1 MiB request needs a new segment.
  DataPtr f = alloc(25, 1 * kMiB);
  EXPECT_EQ(memory_stats(d).num_segments, 2);
  // The freed first block is reused for an equal request.
  DataPtr g = alloc(25, 512 * kKiB);
  EXPECT_EQ(at(g), pa);
}

TEST(Allocator, LargePoolRoundingAndSplitting) {  // cpu:13
  const Device d = Device::cpu(13);
  DataPtr a = alloc(13, 2 * kMiB);  // < 10 MiB: a 20 MiB segment
  EXPECT_EQ(memory_stats(d).reserved_bytes, 20 * kMiB);
  DataPtr b = alloc(13, 3 * kMiB);  // from the same segment
  EXPECT_EQ(at(b), at(a) + 2 * kMiB);
  EXPECT_EQ(memory_stats(d).reserved_bytes, 20 * kMiB);
  a.reset();
  b.reset();
  DataPtr c = alloc(13, 15 * kMiB);  // the merged 20 MiB block serves it
  EXPECT_EQ(memory_stats(d).reserved_bytes, 20 * kMiB);
  DataPtr e = alloc(13, 11 * kMiB + 1);  // > 10 MiB: rounded up to 12 MiB
  EXPECT_EQ(memory_stats(d).reserved_bytes, 32 * kMiB);
  EXPECT_EQ(memory_stats(d).num_segments, 2);
}

TEST(Allocator, StatsCurrentAndPeak) {  // cpu:14
  const Device d = Device::cpu(14);
  DataPtr a = alloc(14, 1000);  // rounded to 1024
  DataPtr b = alloc(14, 3000);  // rounded to 3072
  MemoryStats s = memory_stats(d);
  EXPECT_EQ(s.allocated_bytes, 4096);
  EXPECT_EQ(s.active_bytes, 4096);
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);
  a.reset();
  s = memory_stats(d);
  EXPECT_EQ(s.allocated_bytes, 3072);
  EXPECT_EQ(s.allocated_bytes_peak, 4096);
  EXPECT_EQ(s.active_bytes_peak, 4096);
  EXPECT_EQ(s.num_allocs, 2);
  EXPECT_EQ(s.num_frees, 1);
  reset_peak_memory_stats(d);
  s = memory_stats(d);
  EXPECT_EQ(s.allocated_bytes_peak, 3072);
  EXPECT_EQ(s.reserved_bytes_peak, 2 * kMiB);
  // A large block whose remainder is too small to split is active in full.
  DataPtr c = alloc(14, 19 * kMiB + 512 * kKiB);  // segment 20 MiB, 512 KiB remainder kept
  s = memory_stats(d);
  EXPECT_EQ(s.allocated_bytes, 3072 + 19 * kMiB + 512 * kKiB);
  EXPECT_EQ(s.active_bytes, 3072 + 20 * kMiB);
  EXPECT_EQ(s.reserved_bytes, 22 * kMiB);
  EXPECT_EQ(s.reserved_bytes_peak, 22 * kMiB);
  c.reset();
  b.reset();
  s = memory_stats(d);
  EXPECT_EQ(s.allocated_bytes, 0);
  EXPECT_EQ(s.active_bytes, 0);
  EXPECT_EQ(s.reserved_bytes, 22 * kMiB);  // cached
  EXPECT_EQ(s.num_frees, 3);
}

TEST(Allocator, LimitThrowsOutOfMemoryThenRecovers) {  // cpu:15
  const Device d = Device::cpu(15);
  set_memory_limit(d, 64 * kMiB);
  EXPECT_EQ(memory_limit(d), 64 * kMiB);
  DataPtr big = alloc(15, 60 * kMiB);
  DataPtr small = alloc(15, 1 * kKiB);  // a 2 MiB small-pool segment: 2 MiB - 1 KiB reserved, unused
  DataPtr x = alloc(15, 1 * kMiB + 512 * kKiB);  // a 20 MiB segment does not fit; an exact one does
  EXPECT_EQ(memory_stats(d).reserved_bytes, 63 * kMiB + 512 * kKiB);
  const std::string msg = support::error_of<OutOfMemoryError>([&] { DataPtr y = alloc(15, 2 * kMiB); });
  EXPECT_NE(msg.find("cpu:15 out of memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Tried to allocate 2.00 MiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("total capacity of 64.00 MiB (limit)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("of which 512.00 KiB is free"), std::string::npos) << msg;
  EXPECT_NE(msg.find("61.50 MiB is allocated by ember"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2.00 MiB is reserved by ember but unallocated"), std::string::npos) << msg;
  MemoryStats s = memory_stats(d);
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.num_alloc_retries, 1);  // the cache was emptied once before giving up
  EXPECT_EQ(s.allocated_bytes, 61 * kMiB + 512 * kKiB + 1 * kKiB);
  EXPECT_EQ(s.num_allocs, 3);
  // State is consistent: after freeing, the same request succeeds.
  big.reset();
  DataPtr y = alloc(15, 2 * kMiB);
  ASSERT_NE(y.get(), nullptr);
  std::memset(y.get(), 1, 2 * kMiB);
  EXPECT_LE(memory_stats(d).reserved_bytes, 64 * kMiB);
  // Lifting the limit allows more than before.
  set_memory_limit(d, 0);
  DataPtr z = alloc(15, 80 * kMiB);
  EXPECT_NE(z.get(), nullptr);
}

TEST(Allocator, RetryAfterFreeingCacheSucceeds) {  // cpu:16
  const Device d = Device::cpu(16);
  set_memory_limit(d, 64 * kMiB);
  alloc(16, 40 * kMiB).reset();  // leaves a cached 40 MiB segment
  EXPECT_EQ(memory_stats(d).reserved_bytes, 40 * kMiB);
  DataPtr p = alloc(16, 50 * kMiB);  // does not fit next to the cache; fits once it is freed
  MemoryStats s = memory_stats(d);
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.reserved_bytes, 50 * kMiB);
  EXPECT_EQ(s.num_segments, 1);
}

TEST(Allocator, HugeRequestThrowsOutOfMemory) {  // cpu:26
  EXPECT_THROW(alloc(26, static_cast<int64_t>(SIZE_MAX / 2)), OutOfMemoryError);
  EXPECT_EQ(memory_stats(Device::cpu(26)).num_ooms, 1);
  EXPECT_EQ(memory_stats(Device::cpu(26)).reserved_bytes, 0);
}

// A CPU backend that pretends the device has 32 MiB, to test system allocation failures.
std::mutex g_fake_mutex;
std::unordered_map<void*, size_t> g_fake_blocks;  // guarded by g_fake_mutex
int64_t g_fake_used = 0;                          // guarded by g_fake_mutex
void* fake_alloc(size_t n, int) {
  std::lock_guard<std::mutex> guard(g_fake_mutex);
  if (g_fake_used + static_cast<int64_t>(n) > 32 * kMiB) return nullptr;
  void* p = std::aligned_alloc(64, n);
  g_fake_blocks[p] = n;
  g_fake_used += static_cast<int64_t>(n);
  return p;
}
void fake_free(void* p, int) {
  std::lock_guard<std::mutex> guard(g_fake_mutex);
  g_fake_used -= static_cast<int64_t>(g_fake_blocks.at(p));
  g_fake_blocks.erase(p);
  std::free(p);
}
size_t fake_capacity(int) { return 32 * kMiB; }

TEST(Allocator, SystemFailureRetriesThenReportsCapacity) {  // cpu:17, cpu:27
  const detail::RawMemoryBackend original = detail::raw_memory_backend(DeviceType::CPU);
  detail::register_raw_memory_backend(DeviceType::CPU, {&fake_alloc, &fake_free, &fake_capacity});
  Allocator* a = get_allocator(Device::cpu(17));  // created with the fake backend, keeps it
  detail::register_raw_memory_backend(DeviceType::CPU, original);
  const Device d = Device::cpu(17);

  a->allocate(20 * kMiB).reset();  // a cached 20 MiB segment
  // 25 MiB: the backend refuses (20 + 25 > 32); the retry frees the cache, then it fits.
  DataPtr p = a->allocate(25 * kMiB);
  ASSERT_NE(p.get(), nullptr);
  MemoryStats s = memory_stats(d);
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.reserved_bytes, 26 * kMiB);  // 25 MiB rounded to 2 MiB
  const std::string msg = support::error_of<OutOfMemoryError>([&] { a->allocate(25 * kMiB); });
  EXPECT_NE(msg.find("Tried to allocate 25.00 MiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("total capacity of 32.00 MiB of which 6.00 MiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("25.00 MiB is allocated by ember"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1.00 MiB is reserved by ember but unallocated"), std::string::npos) << msg;
  s = memory_stats(d);
  EXPECT_EQ(s.num_alloc_retries, 2);
  EXPECT_EQ(s.num_ooms, 1);
  p.reset();
  EXPECT_NE(a->allocate(25 * kMiB).get(), nullptr);  // usable after the throw
  empty_cache(d);
  EXPECT_EQ(g_fake_used, 0);  // every segment went back through the fake backend
  // Allocators created after restoring the backend use the real one.
  EXPECT_NE(alloc(27, 40 * kMiB).get(), nullptr);
}

TEST(Allocator, EnvironmentLimitParsing) {  // cpu:7, cpu:8, cpu:18
  {
    ScopedLimitEnv env("cpu=1GB, cpu:7=64MB ,cuda:1=8GB,cpu:18=1.5KB");
    EXPECT_EQ(memory_limit(Device::cpu(7)), 64 * kMiB);
    EXPECT_EQ(memory_limit(Device::cpu(8)), 1024 * kMiB);
    EXPECT_EQ(memory_limit(Device::cpu(18)), 1536);
  }
  // The limit is enforced.
  EXPECT_THROW(alloc(7, 100 * kMiB), OutOfMemoryError);
  EXPECT_NE(alloc(7, 10 * kMiB).get(), nullptr);
  // The variable is read when the allocator is created, not later.
  ScopedLimitEnv env("cpu:7=1MB");
  EXPECT_EQ(memory_limit(Device::cpu(7)), 64 * kMiB);
}

TEST(Allocator, EnvironmentLimitBadSyntaxIsValueError) {  // cpu:9, cpu:19
  for (const char* bad : {"cpu:9=64XB", "cpu:9 64MB", "gpu=1GB", "cpu:x=1MB", "cpu:9=MB", "cpu:99=1MB"}) {
    ScopedLimitEnv env(bad);
    SCOPED_TRACE(bad);
    const std::string msg = support::error_of<ValueError>([&] { memory_limit(Device::cpu(9)); });
    EXPECT_NE(msg.find("EMBER_MEMORY_LIMIT"), std::string::npos) << msg;
    EXPECT_NE(msg.find(bad), std::string::npos) << msg;
  }
  // A bad entry for another device is still reported, naming that entry.
  {
    ScopedLimitEnv env("cpu:9=1GB,cuda:0=12QB");
    const std::string what = support::error_of<ValueError>([&] { memory_limit(Device::cpu(9)); });
    EXPECT_NE(what.find("cuda:0=12QB"), std::string::npos) << what;
  }
  // Nothing was created by the failures: with the variable unset the device works, unlimited.
  EXPECT_EQ(memory_limit(Device::cpu(9)), 0);
  EXPECT_NE(alloc(9, 1000).get(), nullptr);
  EXPECT_THROW(set_memory_limit(Device::cpu(19), -1), ValueError);
}

TEST(Allocator, DevicesAreIndependent) {  // cpu:20, cpu:21
  set_memory_limit(Device::cpu(20), 8 * kMiB);
  DataPtr a = alloc(20, 4 * kMiB);
  EXPECT_EQ(memory_stats(Device::cpu(20)).allocated_bytes, 4 * kMiB);
  EXPECT_EQ(memory_stats(Device::cpu(21)).allocated_bytes, 0);
  EXPECT_EQ(memory_stats(Device::cpu(21)).reserved_bytes, 0);
  EXPECT_EQ(memory_limit(Device::cpu(21)), 0);
  DataPtr b = alloc(21, 30 * kMiB);  // cpu:20's limit does not apply
  EXPECT_EQ(b.device(), Device::cpu(21));
  EXPECT_EQ(memory_stats(Device::cpu(20)).num_allocs, 1);
  EXPECT_EQ(memory_stats(Device::cpu(21)).num_allocs, 1);
  EXPECT_NE(get_allocator(Device::cpu(20)), get_allocator(Device::cpu(21)));
  EXPECT_EQ(get_allocator(Device::cpu(20)), get_allocator(Device::cpu(20)));
}

TEST(Allocator, ConcurrentAllocFreeIsConsistent) {  // cpu:22, cpu:23 (two devices, shared threads)
  constexpr int kThreads = 8;
  constexpr int kIters = 3000;
  const int64_t sizes[] = {100, 4096, 600 * kKiB, 1 * kMiB, 1 * kMiB + 1, 3 * kMiB, 12 * kMiB};
  std::atomic<int> corrupted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<std::pair<DataPtr, int64_t>> live;
      for (int i = 0; i < kIters; ++i) {
        if (live.size() < 6 && (live.empty() || rng() % 2 == 0)) {
          const int64_t n = sizes[rng() % std::size(sizes)];
          DataPtr p = alloc(22 + (rng() % 2), n);
          // Stamp first and last byte with the owner; a block handed out twice would be clobbered.
          at(p)[0] = static_cast<char>(t);
          at(p)[n - 1] = static_cast<char>(t);
          live.emplace_back(std::move(p), n);
        } else {
          const size_t k = rng() % live.size();
          if (at(live[k].first)[0] != static_cast<char>(t) ||
              at(live[k].first)[live[k].second - 1] != static_cast<char>(t))
            ++corrupted;
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(corrupted.load(), 0);
  int64_t total_allocs = 0;
  for (int index : {22, 23}) {
    const Device d = Device::cpu(index);
    MemoryStats s = memory_stats(d);
    EXPECT_EQ(s.allocated_bytes, 0);
    EXPECT_EQ(s.active_bytes, 0);
    EXPECT_EQ(s.num_allocs, s.num_frees);
    EXPECT_GT(s.allocated_bytes_peak, 0);
    total_allocs += s.num_allocs;
    empty_cache(d);  // everything merged back into whole segments
    EXPECT_EQ(memory_stats(d).reserved_bytes, 0);
    EXPECT_EQ(memory_stats(d).num_segments, 0);
  }
  EXPECT_GT(total_allocs, kThreads * kIters / 3);
}

TEST(Allocator, ForkWhileOtherThreadAllocatesDoesNotDeadlockChild) {  // cpu:29
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop) alloc(29, 4096).reset();
  });
  int bad_children = 0;
  for (int i = 0; i < 200; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(5);  // a deadlocked child dies of SIGALRM instead of hanging the test
      DataPtr p = alloc(29, 4096);
      p.reset();
      _exit(memory_stats(Device::cpu(29)).allocated_bytes >= 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++bad_children;
      break;
    }
  }
  stop = true;
  busy.join();
  EXPECT_EQ(bad_children, 0);
}

// The VmFlags line of the /proc/self/smaps mapping that holds `p` ("" when none does).
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = lo <= addr && addr < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

bool kernel_has_thp() { return std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good(); }

// Note [Huge pages for CPU segments]: a block that starts a fresh small-pool (2 MiB) or
// large-pool (20 MiB) segment sits on a 2 MiB boundary, and the kernel has the segment marked
// for huge pages ("hg"); with EMBER_CPU_HUGEPAGES=0 (read once per process, so checked in a
// child process: this binary run again on the test below) nothing is marked.
TEST(Allocator, WholeMiBSegmentsAreHugePageAligned) {  // cpu:30
  const char* env = std::getenv("EMBER_CPU_HUGEPAGES");
  const bool off = env != nullptr && std::string(env) == "0";
  DataPtr small = alloc(30, 600 * kKiB);  // a new 2 MiB small-pool segment
  DataPtr large = alloc(30, 4 * kMiB);    // a new 20 MiB large-pool segment
  EXPECT_EQ(memory_stats(Device::cpu(30)).num_segments, 2);
  for (const DataPtr* p : {&small, &large}) {
    const std::string flags = vm_flags_of(p->get());
    if (off) {
      EXPECT_EQ(flags.find(" hg"), std::string::npos) << flags;
      continue;
    }
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p->get()) % (2 * kMiB), 0u);
#if !defined(EMBER_TEST_ASAN)  // ASan's allocator owns the mappings: only the alignment is ours there
    if (kernel_has_thp()) {
      EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
    }
#endif
  }
}

TEST(Allocator, HugePagesCanBeTurnedOff) {
  if (std::getenv("EMBER_CPU_HUGEPAGES") != nullptr) GTEST_SKIP() << "runs in the child of itself";
  if (!kernel_has_thp()) GTEST_SKIP() << "this kernel has no transparent huge pages: nothing to turn off";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv("EMBER_CPU_HUGEPAGES", "0", 1);
    execl("/proc/self/exe", "allocator_test", "--gtest_filter=Allocator.WholeMiBSegmentsAreHugePageAligned",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's WholeMiBSegmentsAreHugePageAligned failed with hugepages off";
}

TEST(Allocator, StreamAwareReuse) {  // cpu:24
  const Device d = Device::cpu(24);
  DataPtr a = detail::allocate_on_stream(d, 1 * kMiB, 1);
  void* pa = a.get();
  a.reset();
  DataPtr b = detail::allocate_on_stream(d, 1 * kMiB, 0);  // stream 0 must not get stream 1's block
  EXPECT_NE(b.get(), pa);
  EXPECT_EQ(memory_stats(d).num_segments, 2);
  DataPtr c = detail::allocate_on_stream(d, 1 * kMiB, 1);
  EXPECT_EQ(c.get(), pa);
}

TEST(Allocator, MemorySummaryShowsTheNumbers) {  // cpu:28
  const Device d = Device::cpu(28);
  DataPtr a = alloc(28, 3 * kMiB);
  const std::string s = memory_summary(d);
  EXPECT_NE(s.find("cpu:28"), std::string::npos) << s;
  EXPECT_NE(s.find("Allocated memory"), std::string::npos) << s;
  EXPECT_NE(s.find("Active memory"), std::string::npos) << s;
  EXPECT_NE(s.find("Reserved memory"), std::string::npos) << s;
  EXPECT_NE(s.find("3.00 MiB"), std::string::npos) << s;   // allocated
  EXPECT_NE(s.find("20.00 MiB"), std::string::npos) << s;  // reserved
  EXPECT_NE(s.find("17.00 MiB"), std::string::npos) << s;  // cached
  EXPECT_NE(s.find("OOMs: 0"), std::string::npos) << s;
  EXPECT_NE(s.find("alloc retries: 0"), std::string::npos) << s;
}

TEST(Allocator, BadDevicesThrow) {
  EXPECT_THROW(get_allocator(Device(DeviceType::CPU, kMaxDevicesPerType)), Error);
  EXPECT_THROW(get_allocator(Device(DeviceType::CPU, -1)), Error);
#if !EMBER_HAVE_CUDA
  const std::string what = support::error_of<Error>([&] { get_allocator(Device::cuda(0)); });
  EXPECT_NE(what.find("built without CUDA"), std::string::npos) << what;
  EXPECT_THROW(memory_stats(Device::cuda(1)), Error);
#endif
}

// ---- Note [Poisoning in sanitizer builds] (core/allocator.cpp) ------------------------------
#if defined(EMBER_TEST_ASAN)
bool poisoned(const char* p) { return __asan_address_is_poisoned(p) != 0; }
#endif

TEST(Allocator, AsanPoisonsEveryByteNotHandedOut) {  // cpu:40
#if !defined(EMBER_TEST_ASAN)
  GTEST_SKIP() << "poisoning exists only in AddressSanitizer builds (presets asan, asan-ubsan)";
#else
  DataPtr p = alloc(40, 1000);  // rounded to 1024, split off a new 2 MiB small segment
  char* c = at(p);
  EXPECT_EQ(__asan_region_is_poisoned(c, 1000), nullptr) << "the requested bytes are usable";
  EXPECT_TRUE(poisoned(c + 1000));         // the rounding slack
  EXPECT_TRUE(poisoned(c + 1023));
  EXPECT_TRUE(poisoned(c + 1024));         // the free tail the split left in the pool
  EXPECT_TRUE(poisoned(c + 2 * kMiB - 1));
  p.reset();
  EXPECT_TRUE(poisoned(c));                // freed and merged back
  EXPECT_TRUE(poisoned(c + 999));
  DataPtr q = alloc(40, 10);               // the same block again, unpoisoned to the request only
  ASSERT_EQ(at(q), c);
  EXPECT_EQ(__asan_region_is_poisoned(c, 10), nullptr);
  EXPECT_TRUE(poisoned(c + 10));

  // Large pool: a block handed out whole (the remainder, <= 1 MiB, is too small to split)
  // keeps everything past the request poisoned.
  DataPtr a = alloc(40, 3 * kMiB);
  DataPtr b = alloc(40, 3 * kMiB / 2);     // keeps a's block from merging with the tail
  char* pa = at(a);
  a.reset();
  DataPtr e = alloc(40, 5 * kMiB / 2);     // best fit: a's 3 MiB block, not split
  ASSERT_EQ(at(e), pa);
  EXPECT_EQ(memory_stats(Device::cpu(40)).active_bytes - memory_stats(Device::cpu(40)).allocated_bytes,
            kMiB / 2);
  EXPECT_EQ(__asan_region_is_poisoned(pa, 5 * kMiB / 2), nullptr);
  EXPECT_TRUE(poisoned(pa + 5 * kMiB / 2));
  EXPECT_TRUE(poisoned(pa + 3 * kMiB - 1));
  EXPECT_FALSE(poisoned(at(b)));
  // A segment going back to the system is unpoisoned first (or ASan would see its own free of
  // poisoned memory as a bug in later, unrelated allocations).
  e.reset();
  b.reset();
  q.reset();
  empty_cache(Device::cpu(40));
  EXPECT_EQ(memory_stats(Device::cpu(40)).reserved_bytes, 0);
#endif
}

// Regression (issue 19, item 2): one byte written past a tensor whose block came out of a
// segment the allocator already owned went unseen by ASan; it is now a use-after-poison report.
TEST(Allocator, AsanReportsWriteOnePastTensorInCachedSegment) {  // cpu:41
#if !defined(EMBER_TEST_ASAN)
  GTEST_SKIP() << "needs an AddressSanitizer build (presets asan, asan-ubsan) to report the write";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const TensorOptions options = TensorOptions().device(Device::cpu(41));
  { Tensor warm = zeros({1024}, options); }  // leaves a cached 2 MiB segment behind
  Tensor before = zeros({64}, options);
  Tensor t = zeros({3}, options);            // 12 bytes, inside the cached segment
  Tensor after = zeros({64}, options);
  ASSERT_EQ(memory_stats(Device::cpu(41)).num_segments, 1);
  volatile char* bytes = reinterpret_cast<volatile char*>(t.data_ptr<float>());
  bytes[11] = 1;                             // the last requested byte is fine
  EXPECT_DEATH(bytes[12] = 1, "use-after-poison");
#endif
}

}  // namespace
}  // namespace ember
