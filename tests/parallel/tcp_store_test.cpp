// TCPStore beyond the common Store contract (store_test.cpp): real client processes,
// waiting for workers, token authentication, a dead server, and hostile clients that
// speak raw bytes to the server, which must drop only them. Loopback only.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <thread>

#include "core/error.h"
#include "tests/support/free_port.h"
#include "parallel/distributed/detail/wire.h"
#include "parallel/distributed/tcp_store.h"
#include "parallel/distributed/tcp_store_server.h"
#include "tests/parallel/fork_children.h"
#include "tests/support/error_text.h"

namespace ember::parallel {
namespace {

using detail::FrameWriter;
using detail::Op;

constexpr int64_t kTestTimeoutMs = 20'000;
const std::string kToken = "tcp-store-test-token";

TCPStoreOptions server_options(std::optional<int> world_size = std::nullopt) {
  TCPStoreOptions o;
  o.is_server = true;
  o.bind_address = "127.0.0.1";
  o.world_size = world_size;
  o.timeout_ms = kTestTimeoutMs;
  o.token = kToken;
  return o;
}

TCPStoreOptions client_options(std::string token = kToken) {
  TCPStoreOptions o;
  o.timeout_ms = kTestTimeoutMs;
  o.token = std::move(token);
  return o;
}

// ---- raw clients that do not play by the rules --------------------------------------

class RawClient {
 public:
  /// Connects to 127.0.0.1:port, from `source` (another loopback address) when given.
  explicit RawClient(uint16_t port, const char* source = nullptr) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (source != nullptr) {
      sockaddr_in src{};
      src.sin_family = AF_INET;
      ::inet_pton(AF_INET, source, &src.sin_addr);
      EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&src), sizeof src), 0) << source;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawClient() { close(); }
  bool connected() const { return connected_; }
  void send(const std::vector<uint8_t>& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may already have dropped us
      off += static_cast<size_t>(n);
    }
  }
  void send_header(uint32_t len) {
    send({uint8_t(len >> 24), uint8_t(len >> 16), uint8_t(len >> 8), uint8_t(len)});
  }
  void authenticate(const std::string& token = kToken) {
    send(FrameWriter().u8(uint8_t(Op::kAuth)).bytes(detail::kAuthMagic).bytes(token).finish());
    // Swallow the OK response: its frame header, the status and the server's frame limit.
    uint8_t buf[9];
    size_t got = 0;
    while (got < sizeof buf) {
      ssize_t n = ::recv(fd_, buf + got, sizeof buf - got, 0);
      ASSERT_GT(n, 0) << "server dropped a correctly authenticating client";
      got += static_cast<size_t>(n);
    }
    ASSERT_EQ(buf[4], 0) << "authentication refused";
  }
  // True when the server closes this connection within timeout_ms (reading whatever it
  // sends first, such as an auth-failed response).
  bool closed_by_server(int timeout_ms = 10'000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      uint8_t buf[256];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    }
    return false;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

void expect_serves(TCPStore& store, const std::string& key) {
  store.set(key, std::string("value of ") + key);
  EXPECT_EQ(store.get_string(key), "value of " + key);
}

TEST(TCPStore, PortZeroPicksAFreePortThatClientsReach) {
  TCPStore server("127.0.0.1", 0, server_options());
  ASSERT_NE(server.port(), 0);
  EXPECT_TRUE(server.is_server());
  TCPStore client("127.0.0.1", server.port(), client_options());
  EXPECT_FALSE(client.is_server());
  client.set("hello", std::string("world"));
  EXPECT_EQ(server.get_string("hello"), "world");
}

TEST(TCPStore, ClientProcessesRendezvousOnLoopback) {
  // The children are forked before the server (and its thread) exists, and retry until it
  // listens: no fork of a multithreaded process, which ThreadSanitizer cannot follow.
  const uint16_t port = support::free_port();
  constexpr int kChildren = 3;
  const std::vector<pid_t> pids = test::fork_children(kChildren, [&](int i) {
    TCPStore c("127.0.0.1", port, client_options());
    c.add("count", 1);
    c.set("child/" + std::to_string(i), std::to_string(::getpid()));
    c.wait({"go"});
    c.set("ack/" + std::to_string(i), std::string("1"));
  });
  ASSERT_EQ(pids.size(), size_t{kChildren});
  TCPStore server("127.0.0.1", port, server_options());
  std::vector<std::string> children, acks;
  for (int i = 0; i < kChildren; ++i) {
    children.push_back("child/" + std::to_string(i));
    acks.push_back("ack/" + std::to_string(i));
  }
  server.wait(children);
  EXPECT_EQ(server.add("count", 0), kChildren);
  for (int i = 0; i < kChildren; ++i) EXPECT_EQ(server.get_string(children[i]), std::to_string(pids[i]));
  server.set("go", std::string("1"));
  server.wait(acks);
  test::expect_children_succeeded(pids);
}

TEST(TCPStore, ServerWaitsForWorkersThatStartFirst) {
  const uint16_t port = support::free_port();
  // Clients start before the server listens and retry until it does.
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 2; ++i)
    clients.emplace_back([&] {
      auto o = client_options();
      o.world_size = 3;
      TCPStore c("127.0.0.1", port, o);
      c.wait({"ready"});
      ++ok;
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  TCPStore server("127.0.0.1", port, server_options(3));  // returns once all 3 are in
  server.set("ready", std::string("1"));
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 2);
  EXPECT_EQ(server.num_keys(), 1);  // the bookkeeping keys are not counted
}

TEST(TCPStore, WaitForWorkersTimesOutSayingHowManyCame) {
  auto o = server_options(2);
  o.timeout_ms = 200;
  const std::string err = support::error_of<TimeoutError>([&] { TCPStore server("127.0.0.1", 0, o); });
  EXPECT_NE(err.find("1 of 2"), std::string::npos) << err;
}

TEST(TCPStore, ClientWithoutOrWithWrongTokenIsRefused) {
  ::unsetenv(kStoreTokenEnv);
  TCPStore server("127.0.0.1", 0, server_options());
  for (const std::string token : {"", "wrong-token", "tcp-store-test-token-but-longer"}) {
    const std::string err = support::error_of<DistributedError>([&] {
      TCPStore c("127.0.0.1", server.port(), client_options(token));
    });
    EXPECT_NE(err.find("authentication failed"), std::string::npos) << err;
  }
  // The token may come from the environment, as ember-run passes it.
  ::setenv(kStoreTokenEnv, kToken.c_str(), 1);
  TCPStore from_env("127.0.0.1", server.port(), client_options(""));
  ::unsetenv(kStoreTokenEnv);
  expect_serves(from_env, "from_env");
}

TEST(TCPStore, DeadServerGivesDistributedErrorNotAHang) {
  auto server = std::make_unique<TCPStore>("127.0.0.1", 0, server_options());
  const uint16_t port = server->port();
  TCPStore client("127.0.0.1", port, client_options());
  std::thread parked([&] { EXPECT_THROW(client.get("never_set"), DistributedError); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  server.reset();  // the server goes away while a get is parked on it
  parked.join();
  EXPECT_THROW(client.set("k", std::string("v")), DistributedError);
  EXPECT_THROW(client.add("k", 1), DistributedError);
  auto o = client_options();
  o.timeout_ms = 300;
  EXPECT_THROW(TCPStore("127.0.0.1", port, o), DistributedError);
}

TEST(TCPStore, TimedOutGetLeavesTheClientUsable) {
  TCPStore server("127.0.0.1", 0, server_options());
  TCPStore client("127.0.0.1", server.port(), client_options());
  const std::string msg = support::error_of<TimeoutError>([&] { client.get("absent", 100); });
  EXPECT_NE(msg.find("get"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'absent'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("100 ms"), std::string::npos) << msg;
  expect_serves(client, "after_timeout");
  server.set("absent", std::string("now"));  // wakes nobody: the timed-out waiter is gone
  EXPECT_EQ(client.get_string("absent"), "now");
}

TEST(TCPStore, MultiTenantServersShareAPort) {
  const uint16_t port = support::free_port();
  auto o = server_options();
  o.multi_tenant = true;
  TCPStore a("127.0.0.1", port, o);
  TCPStore b("127.0.0.1", port, o);
  EXPECT_EQ(a.server(), b.server());
  a.set("shared", std::string("yes"));
  EXPECT_EQ(b.get_string("shared"), "yes");
}

TEST(TCPStoreServer, StandaloneServerHostsClientsOnly) {
  TCPStoreServerOptions o;
  o.bind_address = "127.0.0.1";
  o.token = kToken;
  TCPStoreServer server(o);
  TCPStore r0("127.0.0.1", server.port(), client_options());
  TCPStore r1("127.0.0.1", server.port(), client_options());
  r0.set("from0", std::string("a"));
  EXPECT_EQ(r1.get_string("from0"), "a");
  EXPECT_EQ(r1.add("n", 1) + r0.add("n", 1), 3);
  server.stop();
  EXPECT_THROW(r0.get("x", 5000), DistributedError);
}

// A set over the server's frame limit was reported as a lost connection ("is the server still
// alive?"). The handshake now tells the client the limit, and the client refuses the request
// with a ValueError naming it, before sending anything; the connection and store stay usable.
TEST(TCPStore, SetOverTheFrameLimitNamesTheLimit) {
  for (uint32_t limit : {uint32_t{64} << 20, uint32_t{1} << 16}) {
    TCPStoreServerOptions o;
    o.bind_address = "127.0.0.1";
    o.token = kToken;
    o.max_frame_bytes = limit;
    TCPStoreServer server(o);
    TCPStore store("127.0.0.1", server.port(), client_options());
    const std::vector<uint8_t> big(static_cast<size_t>(limit) + 1, 7);
    const std::string m = support::error_of<ValueError>([&] { store.set("big", big); });
    EXPECT_NE(m.find("TCPStore::set('big')"), std::string::npos) << m;
    EXPECT_NE(m.find("frame limit of " + std::to_string(limit) + " bytes"), std::string::npos) << m;
    EXPECT_EQ(m.find("still alive"), std::string::npos) << m;
    EXPECT_THROW(store.compare_set("big", std::vector<uint8_t>{}, big), ValueError);
    // Just under the limit (the frame's other fields included) still goes through.
    const std::vector<uint8_t> fits(limit - 64, 3);
    store.set("fits", fits);
    EXPECT_EQ(store.get("fits").size(), fits.size());
  }
}

TEST(TCPStoreServer, BindingAPortInUseThrowsDistributedError) {
  TCPStoreServerOptions o;
  o.bind_address = "127.0.0.1";
  TCPStoreServer first(o);
  o.port = first.port();
  // reuse_address does not let two listeners share a port.
  EXPECT_THROW(TCPStoreServer second(o), DistributedError);
}

// ---- hostile inputs -----------------------------------------------------------------

class HostileClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TCPStoreServerOptions o;
    o.bind_address = "127.0.0.1";
    o.token = kToken;
    o.max_frame_bytes = 1 << 20;
    o.auth_timeout_ms = 500;
    server_ = std::make_unique<TCPStoreServer>(o);
    good_ = std::make_unique<TCPStore>("127.0.0.1", server_->port(), client_options());
  }
  // After each attack: the client that was there before still works, and so does a new one.
  void TearDown() override {
    expect_serves(*good_, "old_client_after_attack");
    TCPStore fresh("127.0.0.1", server_->port(), client_options());
    expect_serves(fresh, "new_client_after_attack");
  }
  uint16_t port() const { return server_->port(); }
  std::unique_ptr<TCPStoreServer> server_;
  std::unique_ptr<TCPStore> good_;
};

TEST_F(HostileClientTest, GarbageBytesAreDropped) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 20; ++round) {
    RawClient raw(port());
    ASSERT_TRUE(raw.connected());
    std::vector<uint8_t> junk(1 + rng() % 2000);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    raw.send(junk);
    if (round % 2 == 0) {
      EXPECT_TRUE(raw.closed_by_server()) << "round " << round;
    }
  }
}

TEST_F(HostileClientTest, SmallGarbageFrameBeforeAuthIsRefused) {
  RawClient raw(port());
  raw.send_header(16);
  raw.send(std::vector<uint8_t>(16, 0xAB));
  EXPECT_TRUE(raw.closed_by_server());
}

TEST_F(HostileClientTest, HugeDeclaredLengthIsDropped) {
  RawClient before_auth(port());
  before_auth.send_header(0xFFFFFFFFu);
  EXPECT_TRUE(before_auth.closed_by_server());

  RawClient after_auth(port());
  after_auth.authenticate();
  after_auth.send_header((1u << 20) + 1);  // one byte over this server's cap
  EXPECT_TRUE(after_auth.closed_by_server());

  RawClient zero(port());
  zero.authenticate();
  zero.send_header(0);
  EXPECT_TRUE(zero.closed_by_server());
}

TEST_F(HostileClientTest, PartialFramesThenDisconnect) {
  for (int i = 0; i < 5; ++i) {
    RawClient raw(port());
    if (i % 2) raw.authenticate();
    raw.send_header(100);
    raw.send(std::vector<uint8_t>(10, 0x42));  // 10 of the 100 promised bytes
    raw.close();
  }
  RawClient half_header(port());
  half_header.send({0x00, 0x00});
  half_header.close();
}

TEST_F(HostileClientTest, MalformedRequestsAfterAuthAreDropped) {
  auto frame_of = [](std::vector<uint8_t> payload) {
    const uint32_t n = static_cast<uint32_t>(payload.size());
    std::vector<uint8_t> f(4 + payload.size());
    for (int i = 0; i < 4; ++i) f[i] = uint8_t(n >> (24 - 8 * i));
    std::copy(payload.begin(), payload.end(), f.begin() + 4);
    return f;
  };
  const std::vector<std::vector<uint8_t>> attacks = {
      frame_of({0x77}),                                   // unknown op
      frame_of({uint8_t(Op::kSet), 0xFF, 0xFF, 0xFF, 0xFF, 'k'}),  // key length overruns
      frame_of({uint8_t(Op::kWait), 0x40, 0x00, 0x00, 0x00}),      // a billion keys
      frame_of({uint8_t(Op::kAuth), 0, 0, 0, 0, 0, 0, 0, 0}),      // auth again
      FrameWriter().u8(uint8_t(Op::kGet)).bytes(std::string("k")).u8(9).finish(),  // trailing byte
  };
  for (const auto& attack : attacks) {
    RawClient raw(port());
    raw.authenticate();
    raw.send(attack);
    EXPECT_TRUE(raw.closed_by_server());
  }
}

TEST_F(HostileClientTest, ClientsVanishingWhileParkedAreForgotten) {
  for (int i = 0; i < 10; ++i) {
    RawClient raw(port());
    raw.authenticate();
    raw.send(FrameWriter().u8(uint8_t(Op::kGet)).bytes(std::string("parked_key")).finish());
    raw.send(FrameWriter().u8(uint8_t(Op::kWait)).u32(1).bytes(std::string("other")).finish());
    raw.close();  // abrupt disconnect with requests parked and queued
  }
  // Setting the keys must not try to answer the vanished clients.
  good_->set("parked_key", std::string("v"));
  good_->set("other", std::string("v"));
}

TEST_F(HostileClientTest, SilentConnectionsAreClosedAfterTheAuthTimeout) {
  RawClient silent(port());
  ASSERT_TRUE(silent.connected());
  EXPECT_TRUE(silent.closed_by_server(10'000));
}

TEST_F(HostileClientTest, ManyConnectionsComeAndGo) {
  std::vector<std::unique_ptr<RawClient>> crowd;
  for (int i = 0; i < 50; ++i) crowd.push_back(std::make_unique<RawClient>(port()));
  crowd.clear();
  // The server notices the disconnects and forgets them (our two clients remain).
  for (int i = 0; i < 100 && server_->num_connections() > 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(server_->num_connections(), 1u);
}

// ---- strangers holding connections open (issue 19, 7(b)) -------------------------------

template <typename F>
bool eventually(F f, int timeout_ms = 10'000) {
  for (int waited = 0; waited < timeout_ms; waited += 10) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return f();
}

// Unauthenticated connections were not limited: 20,000 idle ones exhausted the server's
// descriptors. Over the cap, the oldest stranger is closed, and a real client gets in.
TEST(TCPStoreServer, IdleStrangersAreCappedOldestFirst) {
  TCPStoreServerOptions o;
  o.bind_address = "127.0.0.1";
  o.token = kToken;
  o.max_unauthenticated = 8;
  TCPStoreServer server(o);
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 30; ++i) {
    idle.push_back(std::make_unique<RawClient>(server.port()));
    ASSERT_TRUE(idle.back()->connected());
  }
  EXPECT_TRUE(eventually([&] { return server.num_connections() == 8; })) << server.num_connections();
  EXPECT_EQ(server.num_unauthenticated(), 8u);
  EXPECT_TRUE(idle.front()->closed_by_server());  // the oldest went first
  TCPStore client("127.0.0.1", server.port(), client_options());
  expect_serves(client, "after_strangers");
  EXPECT_LE(server.num_unauthenticated(), 8u);
}

TEST(TCPStoreServer, OnePeerAddressCannotTakeEveryProbationSlot) {
  TCPStoreServerOptions o;
  o.bind_address = "0.0.0.0";  // reached from 127.0.0.2 and 127.0.0.3 alike
  o.token = kToken;
  o.max_unauthenticated = 100;
  o.max_unauthenticated_per_peer = 4;
  TCPStoreServer server(o);
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 10; ++i) idle.push_back(std::make_unique<RawClient>(server.port(), "127.0.0.2"));
  for (int i = 0; i < 3; ++i) idle.push_back(std::make_unique<RawClient>(server.port(), "127.0.0.3"));
  for (auto& c : idle) ASSERT_TRUE(c->connected());
  EXPECT_TRUE(eventually([&] { return server.num_connections() == 7; })) << server.num_connections();
  for (int i = 10; i < 13; ++i) EXPECT_FALSE(idle[i]->closed_by_server(100)) << "127.0.0.3 connection " << i;
  TCPStore client("127.0.0.1", server.port(), client_options());
  expect_serves(client, "after_one_noisy_peer");
}

// The attack at a descriptor limit small enough to reach: the server runs in a child
// process limited to 256 descriptors, and 1000 idle connections arrive. A real client still
// authenticates and works, and the server's process can still open files.
TEST(TCPStoreServer, IdleConnectionsLeaveDescriptorsForClientsAndFiles) {
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(from_child), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    rlimit lim{256, 256};
    ::setrlimit(RLIMIT_NOFILE, &lim);
    TCPStoreServerOptions o;
    o.bind_address = "127.0.0.1";
    o.token = kToken;  // default caps
    TCPStoreServer server(o);
    const uint16_t port = server.port();
    if (::write(from_child[1], &port, sizeof port) != sizeof port) ::_exit(2);
    char cmd = 0;
    if (::read(to_child[0], &cmd, 1) != 1) ::_exit(3);
    int opened = 0;
    std::vector<int> fds;
    for (int i = 0; i < 16; ++i) {
      const int fd = ::open("/dev/null", O_RDONLY);
      if (fd >= 0) fds.push_back(fd), ++opened;
    }
    for (int fd : fds) ::close(fd);
    if (::write(from_child[1], &opened, sizeof opened) != sizeof opened) ::_exit(4);
    ::_exit(0);
  }
  uint16_t port = 0;
  ASSERT_EQ(::read(from_child[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 1000; ++i) idle.push_back(std::make_unique<RawClient>(port));
  {
    TCPStore client("127.0.0.1", port, client_options());
    expect_serves(client, "after_a_thousand_strangers");
  }
  ASSERT_EQ(::write(to_child[1], "f", 1), 1);
  int opened = -1;
  ASSERT_EQ(::read(from_child[0], &opened, sizeof opened), static_cast<ssize_t>(sizeof opened));
  EXPECT_EQ(opened, 16) << "the server's process could not open files";
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
}

}  // namespace
}  // namespace ember::parallel
