// The Store contract, run against every implementation (HashStore, FileStore, TCPStore,
// PrefixStore over both), as ranks-as-threads; plus what is particular to FileStore and
// PrefixStore. TCPStore's processes, authentication and hostile clients are in
// tcp_store_test.cpp.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "core/error.h"
#include "parallel/distributed/file_store.h"
#include "parallel/distributed/hash_store.h"
#include "parallel/distributed/prefix_store.h"
#include "parallel/distributed/tcp_store.h"
#include "tests/parallel/fork_children.h"
#include "tests/support/error_text.h"

namespace ember::parallel {
namespace {

namespace fs = std::filesystem;

// Generous: only there so that a broken store fails instead of hanging the suite.
constexpr int64_t kTestTimeoutMs = 20'000;

std::string temp_dir() {
  std::string tmpl = (fs::temp_directory_path() / "ember_store_test_XXXXXX").string();
  EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

enum class Kind { kHash, kFile, kTcp, kPrefixHash, kPrefixTcp };

std::string kind_name(const ::testing::TestParamInfo<Kind>& info) {
  switch (info.param) {
    case Kind::kHash: return "Hash";
    case Kind::kFile: return "File";
    case Kind::kTcp: return "Tcp";
    case Kind::kPrefixHash: return "PrefixHash";
    case Kind::kPrefixTcp: return "PrefixTcp";
  }
  return "Unknown";
}

// n handles onto one logical store, one per rank, as each kind is used for real: a shared
// HashStore, n FileStores on one path, a TCP server plus n-1 clients.
std::vector<std::shared_ptr<Store>> make_stores(Kind kind, int n, const std::string& dir) {
  std::vector<std::shared_ptr<Store>> stores;
  auto tcp = [&] {
    TCPStoreOptions o;
    o.is_server = true;
    o.bind_address = "127.0.0.1";
    o.timeout_ms = kTestTimeoutMs;
    o.token = "store-test-token";
    auto server = std::make_shared<TCPStore>("127.0.0.1", 0, o);
    std::vector<std::shared_ptr<Store>> out{server};
    o.is_server = false;
    for (int i = 1; i < n; ++i) out.push_back(std::make_shared<TCPStore>("127.0.0.1", server->port(), o));
    return out;
  };
  switch (kind) {
    case Kind::kHash: {
      auto s = std::make_shared<HashStore>(kTestTimeoutMs);
      for (int i = 0; i < n; ++i) stores.push_back(s);
      break;
    }
    case Kind::kFile:
      for (int i = 0; i < n; ++i)
        stores.push_back(std::make_shared<FileStore>(dir + "/store", n, kTestTimeoutMs));
      break;
    case Kind::kTcp:
      stores = tcp();
      break;
    case Kind::kPrefixHash: {
      auto s = std::make_shared<PrefixStore>("job", std::make_shared<HashStore>(kTestTimeoutMs));
      for (int i = 0; i < n; ++i) stores.push_back(s);
      break;
    }
    case Kind::kPrefixTcp:
      for (auto& s : tcp()) stores.push_back(std::make_shared<PrefixStore>("job", s));
      break;
  }
  return stores;
}

class StoreTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override { dir_ = temp_dir(); }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::vector<std::shared_ptr<Store>> stores(int n) { return make_stores(GetParam(), n, dir_); }
  std::string dir_;
};

TEST_P(StoreTest, SetThenGetReturnsTheBytes) {
  auto s = stores(2);
  const std::vector<uint8_t> value{0, 1, 2, 255, 0, 7};
  s[0]->set("k", value);
  EXPECT_EQ(s[1]->get("k"), value);
  s[1]->set("empty", std::vector<uint8_t>{});
  EXPECT_TRUE(s[0]->get("empty").empty());
  s[0]->set("k", std::string("overwritten"));
  EXPECT_EQ(s[1]->get_string("k"), "overwritten");
}

TEST_P(StoreTest, GetWaitsForALaterSet) {
  auto s = stores(2);
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    s[1]->set("late", std::string("here"));
  });
  EXPECT_EQ(s[0]->get_string("late"), "here");
  setter.join();
}

TEST_P(StoreTest, AHugeTimeoutWaitsInsteadOfOverflowing) {
  auto s = stores(2);
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    s[1]->set("eventually", std::string("1"));
  });
  s[0]->wait({"eventually"}, INT64_MAX);
  EXPECT_EQ(s[0]->get_string("eventually"), "1");
  EXPECT_EQ(s[0]->get("eventually", INT64_MAX).size(), 1u);
  setter.join();
}

TEST_P(StoreTest, GetTimesOutNamingKeyAndTimeout) {
  auto s = stores(1);
  s[0]->set_timeout(100);
  EXPECT_EQ(s[0]->timeout(), 100);
  const std::string err = support::error_of<TimeoutError>([&] { s[0]->get("missing_key"); });
  EXPECT_NE(err.find("missing_key"), std::string::npos) << err;
  EXPECT_NE(err.find("100 ms"), std::string::npos) << err;
  // The store is still usable after a timeout.
  s[0]->set("after", std::string("ok"));
  EXPECT_EQ(s[0]->get_string("after"), "ok");
  EXPECT_THROW(s[0]->get("still_missing", 50), TimeoutError);
}

TEST_P(StoreTest, AddCountsFromZeroAndStoresDecimalText) {
  auto s = stores(2);
  EXPECT_EQ(s[0]->add("c", 5), 5);
  EXPECT_EQ(s[1]->add("c", -2), 3);
  EXPECT_EQ(s[0]->add("c", 0), 3);
  EXPECT_EQ(s[1]->get_string("c"), "3");
  s[0]->set("n", std::string("40"));
  EXPECT_EQ(s[1]->add("n", 2), 42);
}

TEST_P(StoreTest, AddOnANonIntegerThrowsValueError) {
  auto s = stores(1);
  s[0]->set("text", std::string("abc"));
  EXPECT_THROW(s[0]->add("text", 1), ValueError);
  EXPECT_EQ(s[0]->get_string("text"), "abc");
  EXPECT_EQ(s[0]->add("fine", 1), 1);  // and the store keeps working
}

// Regression (fuzz/corpus/store_frame/crash_add_overflow): an add past INT64_MAX was signed
// overflow (UBSan in the server); now a ValueError that leaves the counter as it was.
TEST_P(StoreTest, AddThatOverflowsThrowsValueErrorAndKeepsTheCounter) {
  auto s = stores(1);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(s[0]->add("c", kMax), kMax);
  EXPECT_THROW(s[0]->add("c", 1), ValueError);
  EXPECT_EQ(s[0]->get_string("c"), std::to_string(kMax));
  EXPECT_EQ(s[0]->add("low", kMin), kMin);
  EXPECT_THROW(s[0]->add("low", -1), ValueError);
  EXPECT_EQ(s[0]->get_string("low"), std::to_string(kMin));
  EXPECT_EQ(s[0]->add("c", -kMax), 0);  // and the store keeps working
}

TEST_P(StoreTest, CompareSetFollowsPyTorchSemantics) {
  auto s = stores(2);
  // Missing key, non-empty expected: returns expected, stores nothing.
  EXPECT_EQ(s[0]->compare_set("k", "x", "y"), "x");
  EXPECT_FALSE(s[0]->check({"k"}));
  // Missing key, empty expected: sets.
  EXPECT_EQ(s[0]->compare_set("k", "", "v1"), "v1");
  EXPECT_EQ(s[1]->get_string("k"), "v1");
  // Mismatch: returns the current value, unchanged.
  EXPECT_EQ(s[1]->compare_set("k", "nope", "v2"), "v1");
  EXPECT_EQ(s[0]->get_string("k"), "v1");
  // Match: swaps.
  EXPECT_EQ(s[1]->compare_set("k", "v1", "v2"), "v2");
  EXPECT_EQ(s[0]->get_string("k"), "v2");
}

TEST_P(StoreTest, CheckAndWait) {
  auto s = stores(2);
  EXPECT_TRUE(s[0]->check({}));
  EXPECT_FALSE(s[0]->check({"a", "b"}));
  s[1]->set("a", std::string("1"));
  EXPECT_FALSE(s[0]->check({"a", "b"}));
  const std::string err = support::error_of<TimeoutError>([&] { s[0]->wait({"a", "b"}, 100); });
  EXPECT_NE(err.find("b'"), std::string::npos) << err;  // 'b' or 'job/b'
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    s[1]->set("b", std::string("2"));
  });
  s[0]->wait({"a", "b"});
  setter.join();
  EXPECT_TRUE(s[0]->check({"a", "b"}));
  s[0]->wait({});  // nothing to wait for
}

TEST_P(StoreTest, DeleteKeyAndNumKeys) {
  auto s = stores(2);
  EXPECT_EQ(s[0]->num_keys(), 0);
  s[0]->set("a", std::string("1"));
  s[1]->set("b", std::string("2"));
  s[0]->add("c", 1);
  EXPECT_EQ(s[1]->num_keys(), 3);
  EXPECT_TRUE(s[1]->delete_key("a"));
  EXPECT_FALSE(s[0]->delete_key("a"));
  EXPECT_FALSE(s[0]->check({"a"}));
  EXPECT_EQ(s[0]->num_keys(), 2);
  EXPECT_THROW(s[0]->get("a", 50), TimeoutError);
  s[0]->set("a", std::string("again"));
  EXPECT_EQ(s[1]->get_string("a"), "again");
}

TEST_P(StoreTest, RejectsEmptyKeysAndNonPositiveTimeouts) {
  auto s = stores(1);
  EXPECT_THROW(s[0]->set("", std::string("v")), ValueError);
  EXPECT_THROW(s[0]->get(""), ValueError);
  EXPECT_THROW(s[0]->wait({"k"}, 0), ValueError);
  EXPECT_THROW(s[0]->set_timeout(-1), ValueError);
}

TEST_P(StoreTest, RanksAsThreadsCounterReachesWorldSize) {
  constexpr int kWorld = 4;
  auto s = stores(kWorld);
  std::vector<std::thread> ranks;
  std::atomic<int> ok{0};
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      s[r]->set("rank/" + std::to_string(r), std::to_string(r));
      if (s[r]->add("arrived", 1) == kWorld) s[r]->set("go", std::string("1"));
      s[r]->wait({"go"});
      int64_t sum = 0;
      for (int p = 0; p < kWorld; ++p) sum += std::stoi(s[r]->get_string("rank/" + std::to_string(p)));
      if (sum == kWorld * (kWorld - 1) / 2 && s[r]->add("arrived", 0) == kWorld) ++ok;
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(ok.load(), kWorld);
  EXPECT_EQ(s[0]->get_string("arrived"), std::to_string(kWorld));
}

TEST_P(StoreTest, ManyThreadsOnOneInstanceAddExactly) {
  auto s = stores(1);
  constexpr int kThreads = 8, kAdds = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kAdds; ++i) s[0]->add("counter", 1);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(s[0]->add("counter", 0), kThreads * kAdds);
}

TEST_P(StoreTest, BlockedGetDoesNotStallOtherThreadsOfTheSameInstance) {
  auto s = stores(1);
  std::thread waiter([&] { EXPECT_EQ(s[0]->get_string("released"), "yes"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // While the other thread is parked in get(), this one keeps working on the same store.
  s[0]->set("x", std::string("1"));
  EXPECT_EQ(s[0]->get_string("x"), "1");
  EXPECT_EQ(s[0]->add("y", 2), 2);
  s[0]->set("released", std::string("yes"));
  waiter.join();
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreTest,
                         ::testing::Values(Kind::kHash, Kind::kFile, Kind::kTcp, Kind::kPrefixHash,
                                           Kind::kPrefixTcp),
                         kind_name);

// ---- FileStore ------------------------------------------------------------------------

TEST(FileStore, LastOfWorldSizeInstancesRemovesTheFile) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/store";
  {
    FileStore a(path, 2);
    {
      FileStore b(path, 2);
      b.set("k", std::string("v"));
    }
    EXPECT_TRUE(fs::exists(path));
    EXPECT_EQ(a.get_string("k"), "v");
  }
  EXPECT_FALSE(fs::exists(path));
  { FileStore unknown(path); }  // world_size unknown: keep the file
  EXPECT_TRUE(fs::exists(path));
  fs::remove_all(dir);
}

TEST(FileStore, ProcessesShareOneFile) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/store";
  constexpr int kChildren = 3;
  FileStore parent(path, kChildren + 1, kTestTimeoutMs);
  const std::vector<pid_t> pids = test::fork_children(kChildren, [&](int i) {
    FileStore child(path, kChildren + 1, kTestTimeoutMs);
    for (int j = 0; j < 10; ++j) child.add("counter", 1);
    child.set("child/" + std::to_string(i), std::string("done"));
    child.wait({"go"});
  });
  ASSERT_EQ(pids.size(), size_t{kChildren});
  std::vector<std::string> keys;
  for (int i = 0; i < kChildren; ++i) keys.push_back("child/" + std::to_string(i));
  parent.wait(keys);
  EXPECT_EQ(parent.add("counter", 0), 10 * kChildren);
  parent.set("go", std::string("1"));
  test::expect_children_succeeded(pids);
  fs::remove_all(dir);
}

TEST(FileStore, TornTailFromACrashedWriterIsIgnored) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/store";
  {
    FileStore s(path);
    s.set("before", std::string("ok"));
  }
  {
    // A record header promising 5 key bytes, followed by only 2: a writer died mid-append.
    std::ofstream f(path, std::ios::binary | std::ios::app);
    const char rec[] = {'S', 5, 0, 0, 0, 1, 0, 0, 0, 'a', 'b'};
    f.write(rec, sizeof rec);
  }
  FileStore s(path);
  EXPECT_EQ(s.get_string("before"), "ok");
  s.set("after", std::string("fine"));
  EXPECT_EQ(s.get_string("after"), "fine");
  FileStore t(path);
  EXPECT_EQ(t.get_string("after"), "fine");
  EXPECT_EQ(t.num_keys(), 2);
  fs::remove_all(dir);
}

TEST(FileStore, UnwritablePathThrowsDistributedError) {
  EXPECT_THROW(FileStore("/nonexistent_dir_for_ember/store"), DistributedError);
}

// ---- PrefixStore ----------------------------------------------------------------------

TEST(PrefixStore, KeysLiveUnderThePrefixInTheUnderlyingStore) {
  auto base = std::make_shared<HashStore>();
  PrefixStore a("group_a", base), b("group_b", base);
  a.set("k", std::string("from a"));
  b.set("k", std::string("from b"));
  EXPECT_EQ(base->get_string("group_a/k"), "from a");
  EXPECT_EQ(base->get_string("group_b/k"), "from b");
  EXPECT_EQ(a.get_string("k"), "from a");
  EXPECT_EQ(a.add("n", 3), 3);
  EXPECT_TRUE(base->check({"group_a/n"}));
  EXPECT_FALSE(b.check({"n"}));
  PrefixStore nested("inner", std::make_shared<PrefixStore>("outer", base));
  nested.set("x", std::string("1"));
  EXPECT_TRUE(base->check({"outer/inner/x"}));
}

TEST(PrefixStore, RejectsEmptyPrefixAndNullStore) {
  EXPECT_THROW(PrefixStore("", std::make_shared<HashStore>()), ValueError);
  EXPECT_THROW(PrefixStore("p", nullptr), ValueError);
}

}  // namespace
}  // namespace ember::parallel
