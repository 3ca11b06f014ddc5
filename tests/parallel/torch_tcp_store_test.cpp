// TorchTCPStore against PyTorch's own TCPStore server (hosted by /usr/bin/python3 with
// Debian's torch 1.13; skipped with the reason where it is absent): every operation, keys
// shared with Python clients, timeouts, concurrent callers, a lost server. Against a fake
// PyTorch >= 2.1 server written here from Note [PyTorch TCPStore protocol] (VALIDATE
// handshake on every connection, PING, shifted query codes). Against servers that are
// neither: an ember TCPStore and one that answers HTTP, whose errors say what was expected
// and what arrived.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "parallel/distributed/tcp_store.h"
#include "parallel/distributed/torch_tcp_store.h"
#include "tests/parallel/torch_store_host.h"
#include "tests/support/error_text.h"
#include "tests/support/free_port.h"

namespace ember::parallel {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

TorchTCPStoreOptions quick(int64_t timeout_ms = 5000) {
  TorchTCPStoreOptions o;
  o.timeout_ms = timeout_ms;
  return o;
}

class PythonServer : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& host = test::TorchStoreHost::shared();
    if (!host.skip_reason().empty()) GTEST_SKIP() << host.skip_reason();
    port_ = host.new_store();
  }
  uint16_t port_ = 0;
};

TEST_F(PythonServer, EveryOperationMatchesTheStoreContract) {
  TorchTCPStore store("127.0.0.1", port_, quick());
  EXPECT_EQ(store.protocol(), TorchStoreProtocol::kV1) << "torch " << test::TorchStoreHost::shared().version();
  const int64_t before = store.num_keys();
  store.set("a", std::string("hello"));
  EXPECT_EQ(store.get_string("a"), "hello");
  store.set("a", bytes(std::string("\0bin\xff", 5)));
  EXPECT_EQ(store.get("a"), bytes(std::string("\0bin\xff", 5)));
  store.set("empty", std::string());
  EXPECT_TRUE(store.get("empty").empty());
  EXPECT_EQ(store.add("n", 5), 5);
  EXPECT_EQ(store.add("n", -7), -2);
  EXPECT_EQ(store.get_string("n"), "-2");
  EXPECT_EQ(store.compare_set("cs", "", "first"), "first");
  EXPECT_EQ(store.compare_set("cs", "wrong", "second"), "first");
  EXPECT_EQ(store.compare_set("cs", "first", "second"), "second");
  EXPECT_EQ(store.compare_set("missing", "x", "y"), "x");  // PyTorch's answer; nothing stored
  EXPECT_FALSE(store.check({"missing"}));
  EXPECT_TRUE(store.check({"a", "n", "cs"}));
  EXPECT_FALSE(store.check({"a", "missing"}));
  store.wait({"a", "n"});
  EXPECT_EQ(store.num_keys(), before + 4);
  EXPECT_TRUE(store.delete_key("a"));
  EXPECT_FALSE(store.delete_key("a"));
  EXPECT_FALSE(store.check({"a"}));
  EXPECT_EQ(store.num_keys(), before + 3);
}

TEST_F(PythonServer, KeysAreTheKeysPythonClientsSee) {
  TorchTCPStore store("127.0.0.1", port_, quick());
  store.set("shared/key", std::string("from ember"));
  store.add("shared/counter", 41);
  store.add("shared/counter", 1);
  EXPECT_EQ(test::TorchStoreHost::shared().python_get(port_, "shared/key"), "from ember");
  EXPECT_EQ(test::TorchStoreHost::shared().python_get(port_, "shared/counter"), "42");
}

TEST_F(PythonServer, GetAndWaitTimeOutAndTheStoreServesOn) {
  TorchTCPStore store("127.0.0.1", port_, quick());
  const std::string err = support::error_of<TimeoutError>([&] { store.get("never", 200); });
  EXPECT_NE(err.find("'never'"), std::string::npos) << err;
  EXPECT_NE(err.find("200 ms"), std::string::npos) << err;
  EXPECT_THROW(store.wait({"never", "nor_this"}, 100), TimeoutError);
  // The server dropped the abandoned waits: setting the key now disturbs no one.
  store.set("never", std::string("now"));
  EXPECT_EQ(store.get_string("never"), "now");
  TorchTCPStore other("127.0.0.1", port_, quick());
  EXPECT_EQ(other.get_string("never"), "now");
}

TEST_F(PythonServer, BlockedGetInOneThreadDoesNotStallAnother) {
  TorchTCPStore store("127.0.0.1", port_, quick(10'000));
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    EXPECT_EQ(store.get_string("later"), "v");
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int i = 0; i < 20; ++i) store.add("busy", 1);  // on other connections of the pool
  EXPECT_FALSE(got.load());
  store.set("later", std::string("v"));
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(store.get_string("busy"), "20");
}

TEST_F(PythonServer, AddOnTextIsADistributedErrorAndTheStoreServesOn) {
  TorchTCPStore store("127.0.0.1", port_, quick());
  store.set("text", std::string("not a number"));
  const std::string err = support::error_of<DistributedError>([&] { store.add("text", 1); });
  EXPECT_NE(err.find("add('text')"), std::string::npos) << err;
  EXPECT_NE(err.find("closes the connection"), std::string::npos) << err;
  EXPECT_EQ(store.add("fine", 2), 2);
}

// The bug of issue 17: an ember TCPStore client (no TORCHELASTIC_USE_AGENT_STORE) reached
// torchrun's store and reported "the server refused this client's token (none given)".
TEST_F(PythonServer, EmberClientOnAPyTorchStoreSaysSoInsteadOfBlamingTheToken) {
  TCPStoreOptions o;
  o.timeout_ms = 3000;
  const std::string m = support::error_of<DistributedError>([&] { TCPStore store("127.0.0.1", port_, o); });
  EXPECT_EQ(m.find("refused this client's token"), std::string::npos) << m;
  EXPECT_NE(m.find("expected an ember TCPStore"), std::string::npos) << m;
  EXPECT_NE(m.find("TORCHELASTIC_USE_AGENT_STORE=True"), std::string::npos) << m;
}

// ---- a fake PyTorch >= 2.1 server --------------------------------------------------------

// Serves the v2 subset on loopback, one thread per connection; records protocol errors
// (a connection whose first query is not VALIDATE with the magic number).
class FakeV2Server {
 public:
  FakeV2Server() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] {
      while (true) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        std::lock_guard<std::mutex> lock(mu_);
        conns_.push_back(c);
        threads_.emplace_back([this, c] { serve(c); });
      }
    });
  }
  ~FakeV2Server() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    acceptor_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (int c : conns_) ::shutdown(c, SHUT_RDWR);
    for (auto& t : threads_) t.join();
    for (int c : conns_) ::close(c);
  }
  uint16_t port() const { return port_; }
  std::string errors() {
    std::lock_guard<std::mutex> lock(mu_);
    return errors_;
  }
  int validated() const { return validated_.load(); }

 private:
  static bool read_all(int c, void* p, size_t n) {
    auto* b = static_cast<uint8_t*>(p);
    while (n > 0) {
      const ssize_t k = ::read(c, b, n);
      if (k <= 0) return false;
      b += k;
      n -= static_cast<size_t>(k);
    }
    return true;
  }
  static void write_all(int c, const void* p, size_t n) {
    if (::write(c, p, n) != static_cast<ssize_t>(n)) return;
  }
  static bool u64(int c, uint64_t& v) { return read_all(c, &v, 8); }  // little-endian host
  static bool str(int c, std::string& s) {
    uint64_t n;
    if (!u64(c, n) || n > (1u << 20)) return false;
    s.resize(n);
    return read_all(c, s.data(), n);
  }
  static void send_bytes(int c, const std::string& s) {
    const uint64_t n = s.size();
    write_all(c, &n, 8);
    write_all(c, s.data(), s.size());
  }
  void error(const std::string& e) {
    std::lock_guard<std::mutex> lock(mu_);
    errors_ += e + "; ";
  }
  bool has(const std::string& k) {
    std::lock_guard<std::mutex> lock(mu_);
    return data_.count(k) > 0;
  }

  void serve(int c) {
    uint8_t q;
    uint32_t magic = 0;
    if (!read_all(c, &q, 1) || q != 0 || !read_all(c, &magic, 4) || magic != 0x3C85F7CE) {
      error("a connection did not open with VALIDATE 0x3C85F7CE");
      return;
    }
    ++validated_;
    while (read_all(c, &q, 1)) {
      std::string k, v, w;
      uint64_t n;
      switch (q) {
        case 1:  // SET
          if (!str(c, k) || !str(c, v)) return;
          {
            std::lock_guard<std::mutex> lock(mu_);
            data_[k] = v;
          }
          break;
        case 2: {  // COMPARE_SET
          if (!str(c, k) || !str(c, v) || !str(c, w)) return;
          std::lock_guard<std::mutex> lock(mu_);
          auto it = data_.find(k);
          if (it == data_.end()) {
            if (v.empty()) data_[k] = w;
            send_bytes(c, v.empty() ? w : v);
          } else {
            if (it->second == v) it->second = w;
            send_bytes(c, it->second);
          }
          break;
        }
        case 3: {  // GET
          if (!str(c, k)) return;
          std::lock_guard<std::mutex> lock(mu_);
          if (!data_.count(k)) return;  // as PyTorch: closes
          send_bytes(c, data_[k]);
          break;
        }
        case 4: {  // ADD
          int64_t d;
          if (!str(c, k) || !read_all(c, &d, 8)) return;
          std::lock_guard<std::mutex> lock(mu_);
          const int64_t x = (data_.count(k) ? std::stoll(data_[k]) : 0) + d;
          data_[k] = std::to_string(x);
          write_all(c, &x, 8);
          break;
        }
        case 5:    // CHECK
        case 6: {  // WAIT
          if (!u64(c, n)) return;
          std::vector<std::string> keys(n);
          for (auto& key : keys)
            if (!str(c, key)) return;
          auto all = [&] {
            for (auto& key : keys)
              if (!has(key)) return false;
            return true;
          };
          uint8_t r = all() ? 0 : 1;
          if (q == 6) {
            while (!all()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
            r = 0;
          }
          write_all(c, &r, 1);
          break;
        }
        case 7: {  // GETNUMKEYS
          std::lock_guard<std::mutex> lock(mu_);
          const int64_t x = static_cast<int64_t>(data_.size());
          write_all(c, &x, 8);
          break;
        }
        case 8: {  // DELETE_KEY
          if (!str(c, k)) return;
          std::lock_guard<std::mutex> lock(mu_);
          const int64_t x = static_cast<int64_t>(data_.erase(k));
          write_all(c, &x, 8);
          break;
        }
        case 13: {  // PING
          uint32_t nonce;
          if (!read_all(c, &nonce, 4)) return;
          write_all(c, &nonce, 4);
          break;
        }
        default:
          error("unknown query " + std::to_string(q));
          return;
      }
    }
  }

  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> conns_;                     // guarded by mu_
  std::vector<std::thread> threads_;           // guarded by mu_
  std::map<std::string, std::string> data_;    // guarded by mu_
  std::string errors_;                         // guarded by mu_
  std::atomic<int> validated_{0};
};

TEST(TorchTCPStoreV2, SpeaksTheValidatedProtocolOnEveryConnection) {
  FakeV2Server server;
  {
    TorchTCPStore store("127.0.0.1", server.port(), quick());
    EXPECT_EQ(store.protocol(), TorchStoreProtocol::kV2);
    store.set("a", std::string("1"));
    EXPECT_EQ(store.get_string("a"), "1");
    EXPECT_EQ(store.add("n", 3), 3);
    EXPECT_EQ(store.compare_set("a", "1", "2"), "2");
    EXPECT_TRUE(store.check({"a", "n"}));
    EXPECT_FALSE(store.check({"zz"}));
    EXPECT_EQ(store.num_keys(), 2);
    EXPECT_TRUE(store.delete_key("n"));
    // A blocked get on one connection while another thread sets: a second connection.
    std::thread setter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      TorchTCPStore other("127.0.0.1", server.port(), quick());
      other.set("late", std::string("x"));
    });
    EXPECT_EQ(store.get_string("late"), "x");
    setter.join();
  }
  EXPECT_EQ(server.errors(), "");
  EXPECT_GE(server.validated(), 2);
}

// ---- servers that are no PyTorch store -----------------------------------------------------

TEST(TorchTCPStoreForeign, AnEmberStoreIsAnErrorNamingBothProtocolsNotARefusedToken) {
  TCPStoreOptions o;
  o.is_server = true;
  o.token = "tok";
  TCPStore ember("127.0.0.1", 0, o);
  const std::string m = support::error_of<DistributedError>([&] {
    TorchTCPStore store("127.0.0.1", ember.port(), quick(3000));
  });
  EXPECT_NE(m.find("speaks neither PyTorch TCPStore protocol"), std::string::npos) << m;
  EXPECT_NE(m.find("PyTorch >= 2.1"), std::string::npos) << m;
  EXPECT_NE(m.find("PyTorch 1.13-2.0"), std::string::npos) << m;
  EXPECT_NE(m.find("closed the connection"), std::string::npos) << m;
  EXPECT_EQ(m.find("token"), std::string::npos) << m;
}

TEST(TorchTCPStoreForeign, AnHttpServerIsAnErrorShowingTheBytesThatCame) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ::listen(fd, 8);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  std::thread http([fd] {
    for (int i = 0; i < 3; ++i) {
      const int c = ::accept(fd, nullptr, nullptr);
      if (c < 0) return;
      const char reply[] = "HTTP/1.0 400 Bad Request\r\n\r\n";
      if (::write(c, reply, sizeof reply - 1) < 0) {
      }
      ::close(c);
    }
  });
  const std::string err = support::error_of<DistributedError>([&] {
    TorchTCPStore store("127.0.0.1", ntohs(a.sin_port), quick(3000));
  });
  EXPECT_NE(err.find("\"HTTP"), std::string::npos) << err;
  EXPECT_NE(err.find("48 54 54 50"), std::string::npos) << err;
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
  http.join();
}

TEST(TorchTCPStoreForeign, NoServerIsADistributedErrorWithinTheTimeout) {
  const uint16_t port = support::free_port();  // a port nobody listens on
  ASSERT_NE(port, 0);
  EXPECT_THROW(TorchTCPStore("127.0.0.1", port, quick(300)), DistributedError);
}

}  // namespace
}  // namespace ember::parallel
