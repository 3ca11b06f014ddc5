#include "parallel/distributed/tcp/detail/mesh.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <thread>

#include "core/error.h"

namespace ember::parallel::tcp::detail {

namespace {

constexpr uint32_t kHelloMagic = 0x454d4d48;  // "EMMH"
constexpr uint32_t kHelloVersion = 1;
constexpr size_t kSecretBytes = 32;

struct Hello {
  uint32_t magic = kHelloMagic;
  uint32_t version = kHelloVersion;
  int32_t rank = -1;
  int32_t channel = -1;
  char secret[kSecretBytes] = {};
};
static_assert(sizeof(Hello) == 48, "Hello is a wire format");

std::string make_secret() {
  std::random_device rd;
  static const char kHex[] = "0123456789abcdef";
  std::string s(kSecretBytes, '0');
  for (auto& c : s) c = kHex[rd() & 15u];
  return s;
}

bool secret_equal(const char* a, const std::string& b) {
  unsigned char diff = 0;
  for (size_t i = 0; i < kSecretBytes; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Hello make_hello(int rank, int channel, const std::string& secret) {
  Hello h;
  h.rank = rank;
  h.channel = channel;
  std::memcpy(h.secret, secret.data(), kSecretBytes);
  return h;
}

// Note [Concurrent handshakes]
// A rank accepts its higher peers' connections on one listener that anyone can reach, so
// a connection proves itself with the hello (rank, channel, the group's secret) before it
// is used. Handshakes proceed side by side: every accepted connection that has not yet sent
// its whole hello is polled together with the listener, so a stranger that says nothing,
// or half a hello, costs a real rank nothing. Each gets kHelloGrace to finish; at most
// kMaxPendingHandshakes wait at once, and a newcomer beyond that pushes the oldest out
// (a real rank sends its hello right after connecting, so it is never the oldest for long).
constexpr auto kHelloGrace = std::chrono::seconds(5);
constexpr size_t kMaxPendingHandshakes = 128;

struct Handshake {
  Socket socket;
  Hello hello;
  size_t received = 0;      // bytes of `hello` so far
  Clock::time_point until;  // dropped when not complete by then
};

std::string errno_text(int e) { return std::string(std::strerror(e)) + " (errno " + std::to_string(e) + ")"; }

struct Address {
  sockaddr_storage storage{};
  socklen_t len = 0;
};

// Resolves host (numeric or a name) and port; throws DistributedError.
Address resolve(const std::string& who, const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port_s = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), port_s.c_str(), &hints, &res);
  EMBER_CHECK_T(DistributedError, rc == 0 && res != nullptr, who, ": cannot resolve host '", host,
                "': ", ::gai_strerror(rc));
  Address a;
  std::memcpy(&a.storage, res->ai_addr, res->ai_addrlen);
  a.len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return a;
}

std::pair<std::string, uint16_t> split_host_port(const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos) return {s, 0};
  return {s.substr(0, colon), static_cast<uint16_t>(std::atoi(s.c_str() + colon + 1))};
}

// Connects to addr from `local` (this rank's advertised address, any port) when it is of the
// same address family, retrying refused connections until the deadline. Returns -1 and sets
// *error on failure. See Note [Source address].
int connect_until(const Address& addr, const Address& local, Clock::time_point deadline, int* error) {
  for (;;) {
    int fd = ::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      *error = errno;
      return -1;
    }
    if (local.storage.ss_family == addr.storage.ss_family &&
        ::bind(fd, reinterpret_cast<const sockaddr*>(&local.storage), local.len) != 0) {
      *error = errno;
      ::close(fd);
      return -1;
    }
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) == 0) return fd;
    *error = errno;
    ::close(fd);
    if (Clock::now() >= deadline || (*error != ECONNREFUSED && *error != EINTR && *error != ETIMEDOUT &&
                                     *error != EAGAIN))
      return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int64_t remaining_ms(Clock::time_point deadline) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms < 1 ? 1 : ms;
}

}  // namespace

std::string default_host() {
  if (const char* h = std::getenv("EMBER_TCP_HOST"); h != nullptr && *h != '\0') return h;
  const char* master = std::getenv("MASTER_ADDR");
  if (master == nullptr || *master == '\0') return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(master, "9", &hints, &res) != 0 || res == nullptr) return "127.0.0.1";
  std::string out = "127.0.0.1";
  // A UDP "connection" sends nothing; it only asks the kernel which local address routes there.
  const int fd = ::socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    char buf[INET6_ADDRSTRLEN] = {};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      const void* src = local.ss_family == AF_INET6
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
      if (::inet_ntop(local.ss_family, src, buf, sizeof buf) != nullptr) out = buf;
    }
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(res);
  return out;
}

Mesh::Mesh(Store& store, const MeshOptions& o) {
  sockets_.resize(static_cast<size_t>(o.size) * kNumChannels);
  if (o.size == 1) return;
  const auto deadline = Clock::now() + std::chrono::milliseconds(o.timeout_ms);
  const std::string& who = o.who;

  std::string secret;
  if (o.rank == 0) {
    secret = make_secret();
    store.set("tcp/secret", secret);
  } else {
    const auto bytes = store.get("tcp/secret", remaining_ms(deadline));
    secret.assign(bytes.begin(), bytes.end());
    EMBER_CHECK_T(DistributedError, secret.size() == kSecretBytes, who,
                  ": malformed tcp/secret in the store (", secret.size(), " bytes)");
  }

  // Listen on the advertised address, on a port the kernel picks.
  Address bind_addr = resolve(who, o.host, 0);
  Socket listener(::socket(bind_addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EMBER_CHECK_T(DistributedError, listener.valid(), who, ": socket(): ", errno_text(errno));
  int one = 1;
  ::setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  EMBER_CHECK_T(DistributedError,
                ::bind(listener.fd(), reinterpret_cast<sockaddr*>(&bind_addr.storage), bind_addr.len) == 0,
                who, ": cannot listen on ", o.host, ": ", errno_text(errno),
                " (set EMBER_TCP_HOST to an address of this host)");
  EMBER_CHECK_T(DistributedError, ::listen(listener.fd(), o.size * kNumChannels + 16) == 0, who,
                ": listen(): ", errno_text(errno));
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  ::getsockname(listener.fd(), reinterpret_cast<sockaddr*>(&bound), &bound_len);
  const uint16_t port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                          : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  address_ = o.host + ":" + std::to_string(port);
  store.set("tcp/addr/" + std::to_string(o.rank), address_);
  // Note [Source address]: connections to lower ranks leave from the advertised address too
  // (port 0: the kernel picks), so on a host with several addresses (or several loopback
  // "hosts" in a test) a rank's traffic comes from the address its peers know it by, not
  // from whichever address the route would pick. bind_addr's port is 0.

  // Connect to every lower rank (they accept us), channel by channel.
  for (int peer = 0; peer < o.rank; ++peer) {
    const auto where_bytes = store.get("tcp/addr/" + std::to_string(peer), remaining_ms(deadline));
    const std::string where(where_bytes.begin(), where_bytes.end());
    const auto [host, peer_port] = split_host_port(where);
    const Address addr = resolve(who, host, peer_port);
    for (int ch = 0; ch < kNumChannels; ++ch) {
      int err = 0;
      Socket s(connect_until(addr, bind_addr, deadline, &err));
      EMBER_CHECK_T(DistributedError, s.valid(), who, ": cannot connect to rank ", peer, " at ", where,
                    ": ", errno_text(err));
      s.configure(o.buffer_bytes);
      Hello mine = make_hello(o.rank, ch, secret);
      IoResult r = s.send_all(&mine, sizeof mine, deadline);
      Hello theirs;
      if (r.ok()) r = s.recv_all(&theirs, sizeof theirs, deadline);
      EMBER_CHECK_T(DistributedError, r.ok(), who, ": connecting to rank ", peer, " at ", where, ": ",
                    r.describe());
      EMBER_CHECK_T(DistributedError,
                    theirs.magic == kHelloMagic && theirs.version == kHelloVersion && theirs.rank == peer &&
                        theirs.channel == ch && secret_equal(theirs.secret, secret),
                    who, ": the process at ", where, " did not answer as rank ", peer,
                    " of this group (stale address or another job?)");
      sockets_[index(peer, ch)] = std::move(s);
    }
  }

  // Accept every higher rank's connections; see Note [Concurrent handshakes].
  int missing = (o.size - 1 - o.rank) * kNumChannels;
  std::deque<Handshake> pending;  // oldest first
  auto take = [&](Handshake& h) {
    // Complete hello in: ours, or drop it. Either way it leaves `pending`.
    const Hello& theirs = h.hello;
    if (theirs.magic != kHelloMagic || theirs.version != kHelloVersion || theirs.rank <= o.rank ||
        theirs.rank >= o.size || theirs.channel < 0 || theirs.channel >= kNumChannels ||
        !secret_equal(theirs.secret, secret) || sockets_[index(theirs.rank, theirs.channel)].valid())
      return;  // not one of ours
    // 48 bytes into an empty socket buffer: this does not wait in practice.
    Hello mine = make_hello(o.rank, theirs.channel, secret);
    if (!h.socket.send_all(&mine, sizeof mine, std::min(deadline, Clock::now() + kHelloGrace)).ok()) return;
    sockets_[index(theirs.rank, theirs.channel)] = std::move(h.socket);
    --missing;
  };
  // Reads what has arrived; true when the handshake is finished (taken or dropped).
  auto progress = [&](Handshake& h) {
    size_t got = 0;
    const IoResult r =
        h.socket.recv_some(reinterpret_cast<char*>(&h.hello) + h.received, sizeof(Hello) - h.received, &got);
    if (!r.ok()) return true;  // closed or failed: drop
    h.received += got;
    if (h.received < sizeof(Hello)) return false;
    take(h);
    return true;
  };
  std::vector<pollfd> fds;
  while (missing > 0) {
    const auto now = Clock::now();
    while (!pending.empty() && pending.front().until <= now) pending.pop_front();  // said too little in time
    Clock::time_point wake = deadline;
    if (!pending.empty()) wake = std::min(wake, pending.front().until);
    fds.assign(1, pollfd{listener.fd(), POLLIN, 0});
    for (const auto& h : pending) fds.push_back(pollfd{h.socket.fd(), POLLIN, 0});
    const int pr = ::poll(fds.data(), fds.size(), poll_timeout_ms(wake));
    if (pr < 0 && errno == EINTR) continue;
    if (Clock::now() >= deadline) {  // even when strangers keep talking
      std::string ranks;
      for (int peer = o.rank + 1; peer < o.size; ++peer)
        for (int ch = 0; ch < kNumChannels; ++ch)
          if (!sockets_[index(peer, ch)].valid()) {
            ranks += (ranks.empty() ? "" : ", ") + std::to_string(peer);
            break;
          }
      EMBER_THROW(DistributedError, who, ": rendezvous timed out after ", o.timeout_ms,
                  " ms: rank(s) ", ranks, " never connected");
    }
    if (pr <= 0) continue;
    // Handshakes with data first (indices in `fds` are 1 + index in `pending`).
    size_t kept = 0;
    for (size_t i = 0; i < pending.size(); ++i) {
      const bool finished = fds[i + 1].revents != 0 && progress(pending[i]);
      if (!finished) {
        if (kept != i) pending[kept] = std::move(pending[i]);
        ++kept;
      }
    }
    pending.resize(kept);
    if (fds[0].revents == 0) continue;
    Socket s(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!s.valid()) continue;
    s.configure(o.buffer_bytes);
    Handshake h{std::move(s), Hello{}, 0, Clock::now() + kHelloGrace};
    if (progress(h)) continue;  // a real rank's hello is usually there already
    if (pending.size() >= kMaxPendingHandshakes) pending.pop_front();  // the oldest has had the longest
    pending.push_back(std::move(h));
  }
}

void Mesh::shutdown_all() {
  for (auto& s : sockets_) s.shutdown();
}

}  // namespace ember::parallel::tcp::detail
