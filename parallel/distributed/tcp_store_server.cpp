#include "parallel/distributed/tcp_store_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include "parallel/distributed/detail/asio.h"
#include <array>
#include <deque>
#include <list>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>

#include "core/error.h"
#include "parallel/distributed/detail/wire.h"
#include "parallel/distributed/store.h"

namespace ember::parallel {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using detail::FrameReader;
using detail::FrameWriter;
using detail::Op;
using detail::Status;

namespace {

class Session;

// A parked GET or WAIT: the keys it still misses. Owned by the waiter table and by its
// session; `active` goes false once it has fired or its session closed.
struct Waiter {
  std::weak_ptr<Session> session;
  std::set<std::string> missing;
  bool is_get = false;
  std::string get_key;
  std::vector<uint8_t> value;  // GET: the value at the moment the key arrived
  bool active = true;
};

// Requests a connection may queue behind a parked one before it counts as abuse.
constexpr size_t kMaxQueuedRequests = 16;

// Note [Unauthenticated connections]
// Anyone who can reach the port can open connections; only a client that presents the
// token becomes trusted. Until then a connection is on probation, and probation is capped:
// at most max_unauthenticated connections in all (and no more than a quarter of the
// process's descriptor limit), max_unauthenticated_per_peer from one address. A newcomer
// over a cap closes the oldest connection on probation (the newest is the likeliest to be a
// client about to authenticate: a real client sends its token right after connecting), and
// when accept() finds no descriptor left, the oldest on probation is closed to make one.
// So 20,000 idle connections cost a few hundred descriptors, not all of them, and a real
// client always gets in. Authenticated connections are not capped: they hold the token.
size_t descriptor_share() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
  return std::max<size_t>(4, static_cast<size_t>(lim.rlim_cur) / 4);
}

bool is_internal_key(const std::string& key) {
  return key.compare(0, detail::kInternalKeyPrefix.size(), detail::kInternalKeyPrefix) == 0;
}

}  // namespace

class TCPStoreServer::Impl {
 public:
  explicit Impl(TCPStoreServerOptions options);
  ~Impl() { stop(); }

  void stop();
  uint16_t port() const { return port_; }
  const std::string& bind_address() const { return options_.bind_address; }
  size_t num_connections() const { return num_connections_.load(); }
  size_t num_unauthenticated() const { return num_unauthenticated_.load(); }

  // ---- used by Session, on the io thread only ----
  const TCPStoreServerOptions& options() const { return options_; }
  asio::io_context& io() { return io_; }
  void session_closed(Session* s);
  void session_opened() { num_connections_.fetch_add(1); }
  // Probation bookkeeping (Note [Unauthenticated connections]).
  void probation_begin(Session* s, const std::string& peer);
  void probation_end(Session* s);
  std::unordered_map<std::string, std::vector<uint8_t>>& data() { return data_; }
  void key_written(const std::string& key);
  void insert(const std::string& key, std::vector<uint8_t> value);
  bool erase(const std::string& key);
  int64_t num_user_keys() const { return static_cast<int64_t>(data_.size()) - num_internal_keys_; }
  void park(const std::shared_ptr<Waiter>& w);
  void unpark(const std::shared_ptr<Waiter>& w);

 private:
  void accept();
  // Closes the oldest session on probation (from `peer` when given); false when none.
  bool close_oldest_unauthenticated(const std::string* peer);

  TCPStoreServerOptions options_;
  asio::io_context io_;  // declared first: outlives the sockets below
  tcp::acceptor acceptor_;
  asio::steady_timer accept_retry_;
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stopped_{false};
  std::atomic<size_t> num_connections_{0};
  std::atomic<size_t> num_unauthenticated_{0};
  size_t max_unauthenticated_ = 0;  // options_.max_unauthenticated, held to descriptor_share()

  // Everything below is touched only on the io thread.
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions_;

 public:
  struct Probation {
    Session* session;
    std::string peer;
  };

 private:
  std::list<Probation> probation_;  // unauthenticated sessions, oldest first
  std::unordered_map<std::string, size_t> probation_per_peer_;
  std::unordered_map<std::string, std::vector<uint8_t>> data_;
  int64_t num_internal_keys_ = 0;
  std::unordered_map<std::string, std::vector<std::shared_ptr<Waiter>>> waiters_;

  friend class Session;
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(TCPStoreServer::Impl& server, tcp::socket socket, std::string peer)
      : server_(server), socket_(std::move(socket)), auth_timer_(server.io()), peer_(std::move(peer)) {}

  void start() {
    server_.session_opened();
    server_.probation_begin(this, peer_);
    auto self = shared_from_this();
    auth_timer_.expires_after(std::chrono::milliseconds(server_.options().auth_timeout_ms));
    auth_timer_.async_wait([self](const boost::system::error_code& ec) {
      if (!ec && !self->authenticated_) self->close();
    });
    read_header();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    auth_timer_.cancel();
    if (!authenticated_) server_.probation_end(this);
    if (parked_) {
      parked_->active = false;
      server_.unpark(parked_);
      parked_.reset();
    }
    requests_.clear();
    write_queue_.clear();
    server_.session_closed(this);
  }

  // Called (deferred through the io_context) when a parked request's keys all exist.
  void resume(const std::shared_ptr<Waiter>& w) {
    if (closed_ || parked_ != w) return;
    parked_.reset();
    if (w->is_get)
      respond(FrameWriter().u8(uint8_t(Status::kOk)).bytes(w->value));
    else
      respond(FrameWriter().u8(uint8_t(Status::kOk)));
    process_queue();
  }

 private:
  void read_header() {
    if (closed_ || close_after_write_) return;
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(header_),
                     [self](const boost::system::error_code& ec, size_t) { self->on_header(ec); });
  }

  void on_header(const boost::system::error_code& ec) {
    if (ec || closed_) return close();
    const uint32_t len = detail::decode_u32(header_.data());
    const uint32_t cap =
        authenticated_ ? server_.options().max_frame_bytes : detail::kMaxAuthFrameBytes;
    if (len == 0 || len > cap) return close();  // hostile or broken: drop this connection only
    body_.resize(len);
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(body_),
                     [self](const boost::system::error_code& ec2, size_t) { self->on_body(ec2); });
  }

  void on_body(const boost::system::error_code& ec) {
    if (ec || closed_) return close();
    if (!authenticated_) {
      if (!authenticate()) return;
    } else {
      if (requests_.size() >= kMaxQueuedRequests) return close();
      requests_.push_back(std::move(body_));
      body_ = {};
      process_queue();
    }
    read_header();
  }

  bool authenticate() {
    bool ok = false;
    try {
      FrameReader r(body_.data(), body_.size());
      if (r.u8() == uint8_t(Op::kAuth)) {
        const std::string magic = r.string();
        const std::string token = r.string();
        ok = r.at_end() && magic == detail::kAuthMagic &&
             detail::constant_time_equal(token, server_.options().token);
      }
    } catch (const FrameReader::MalformedFrame&) {
      ok = false;
    }
    if (!ok) {
      respond(FrameWriter().u8(uint8_t(Status::kAuthFailed)));
      close_after_write_ = true;
      return false;
    }
    authenticated_ = true;
    server_.probation_end(this);
    auth_timer_.cancel();
    // The frame limit rides on the handshake's answer, so that a client names it when a
    // request would exceed it instead of seeing its connection closed.
    respond(FrameWriter().u8(uint8_t(Status::kOk)).u32(server_.options().max_frame_bytes));
    return true;
  }

  void process_queue() {
    while (!closed_ && !parked_ && !requests_.empty()) {
      std::vector<uint8_t> req = std::move(requests_.front());
      requests_.pop_front();
      try {
        handle(req);
      } catch (const FrameReader::MalformedFrame&) {
        return close();
      } catch (const std::exception& e) {
        // A request we could parse but not satisfy (e.g. add on a non-integer): report it
        // and keep the connection.
        respond(FrameWriter().u8(uint8_t(Status::kError)).bytes(std::string_view(e.what())));
      }
    }
  }

  void handle(const std::vector<uint8_t>& req) {
    FrameReader r(req.data(), req.size());
    const auto op = static_cast<Op>(r.u8());
    auto& data = server_.data();
    auto ok = [] { return FrameWriter().u8(uint8_t(Status::kOk)); };
    switch (op) {
      case Op::kSet: {
        std::string key = r.string();
        std::vector<uint8_t> value = r.bytes();
        expect_end(r);
        server_.insert(key, std::move(value));
        server_.key_written(key);
        respond(ok());
        return;
      }
      case Op::kGet: {
        std::string key = r.string();
        expect_end(r);
        auto it = data.find(key);
        if (it != data.end()) {
          respond(ok().bytes(it->second));
          return;
        }
        auto w = std::make_shared<Waiter>();
        w->session = weak_from_this();
        w->missing.insert(key);
        w->is_get = true;
        w->get_key = key;
        parked_ = w;
        server_.park(w);
        return;
      }
      case Op::kAdd: {
        std::string key = r.string();
        const int64_t delta = r.i64();
        expect_end(r);
        auto it = data.find(key);
        const int64_t value = detail::added_counter(key, it != data.end() ? &it->second : nullptr, delta);
        server_.insert(key, detail::format_counter(value));
        server_.key_written(key);
        respond(ok().i64(value));
        return;
      }
      case Op::kCompareSet: {
        std::string key = r.string();
        std::vector<uint8_t> expected = r.bytes();
        std::vector<uint8_t> desired = r.bytes();
        expect_end(r);
        auto it = data.find(key);
        const auto outcome = detail::compare_set_rule(it == data.end() ? nullptr : &it->second, expected, desired);
        respond(ok().bytes(*outcome.result));
        if (outcome.write) {
          server_.insert(key, desired);
          server_.key_written(key);
        }
        return;
      }
      case Op::kCheck:
      case Op::kWait: {
        const uint32_t n = r.u32();
        if (n > r.remaining() / 4) throw FrameReader::MalformedFrame{};  // each key is >= 4 bytes
        std::set<std::string> missing;
        for (uint32_t i = 0; i < n; ++i) {
          std::string key = r.string();
          if (data.find(key) == data.end()) missing.insert(std::move(key));
        }
        expect_end(r);
        if (op == Op::kCheck) {
          respond(ok().u8(missing.empty() ? 1 : 0));
        } else if (missing.empty()) {
          respond(ok());
        } else {
          auto w = std::make_shared<Waiter>();
          w->session = weak_from_this();
          w->missing = std::move(missing);
          parked_ = w;
          server_.park(w);
        }
        return;
      }
      case Op::kDelete: {
        std::string key = r.string();
        expect_end(r);
        respond(ok().u8(server_.erase(key) ? 1 : 0));
        return;
      }
      case Op::kNumKeys:
        expect_end(r);
        respond(ok().i64(server_.num_user_keys()));
        return;
      case Op::kPing:
        expect_end(r);
        respond(ok());
        return;
      case Op::kAuth:
        break;  // only valid as the first frame
    }
    throw FrameReader::MalformedFrame{};
  }

  static void expect_end(const FrameReader& r) {
    if (!r.at_end()) throw FrameReader::MalformedFrame{};
  }

  void respond(FrameWriter&& w) { respond(w); }
  void respond(FrameWriter& w) {
    if (closed_) return;
    write_queue_.push_back(w.finish());
    if (write_queue_.size() == 1) write_next();
  }

  void write_next() {
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(write_queue_.front()),
                      [self](const boost::system::error_code& ec, size_t) {
                        if (self->closed_) return;
                        if (ec) return self->close();
                        self->write_queue_.pop_front();
                        if (!self->write_queue_.empty())
                          self->write_next();
                        else if (self->close_after_write_)
                          self->close();
                      });
  }

  TCPStoreServer::Impl& server_;
  tcp::socket socket_;
  asio::steady_timer auth_timer_;
  std::string peer_;  // the client's address, for the per-peer cap

 public:
  std::list<TCPStoreServer::Impl::Probation>::iterator probation_pos;  // valid while on probation

 private:
  std::array<uint8_t, detail::kFrameHeaderBytes> header_{};
  std::vector<uint8_t> body_;
  bool authenticated_ = false;
  bool closed_ = false;
  bool close_after_write_ = false;
  std::shared_ptr<Waiter> parked_;                 // the GET/WAIT this connection waits on
  std::deque<std::vector<uint8_t>> requests_;      // arrived behind the parked one
  std::deque<std::vector<uint8_t>> write_queue_;   // front is being written
};

}  // namespace

// ---- TCPStoreServer::Impl --------------------------------------------------------

TCPStoreServer::Impl::Impl(TCPStoreServerOptions options)
    : options_(std::move(options)), acceptor_(io_), accept_retry_(io_) {
  EMBER_CHECK_T(ValueError, options_.max_frame_bytes >= detail::kMaxAuthFrameBytes,
                "TCPStoreServer: max_frame_bytes must be at least ", detail::kMaxAuthFrameBytes,
                ", got ", options_.max_frame_bytes);
  EMBER_CHECK_T(ValueError, options_.auth_timeout_ms > 0,
                "TCPStoreServer: auth_timeout_ms must be positive, got ", options_.auth_timeout_ms);
  EMBER_CHECK_T(ValueError, options_.max_unauthenticated > 0 && options_.max_unauthenticated_per_peer > 0,
                "TCPStoreServer: max_unauthenticated and max_unauthenticated_per_peer must be positive, got ",
                options_.max_unauthenticated, " and ", options_.max_unauthenticated_per_peer);
  max_unauthenticated_ = std::min(options_.max_unauthenticated, descriptor_share());
  boost::system::error_code ec;
  tcp::endpoint endpoint;
  auto address = asio::ip::make_address(options_.bind_address, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, options_.port);
  } else {
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(options_.bind_address, std::to_string(options_.port),
                                    tcp::resolver::passive, ec);
    if (ec || results.empty())
      EMBER_THROW(DistributedError, "TCPStoreServer: cannot resolve bind address '",
                  options_.bind_address, "': ", ec.message());
    endpoint = results.begin()->endpoint();
  }
  auto fail = [&](const char* what) {
    EMBER_THROW(DistributedError, "TCPStoreServer: cannot ", what, " ", options_.bind_address, ":",
                options_.port, ": ", ec.message());
  };
  acceptor_.open(endpoint.protocol(), ec);
  if (ec) fail("open a socket for");
  acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  acceptor_.bind(endpoint, ec);
  if (ec) fail("bind");
  acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) fail("listen on");
  port_ = acceptor_.local_endpoint().port();
  accept();
  thread_ = std::thread([this] {
    while (true) {
      try {
        io_.run();
        return;
      } catch (...) {
        // A handler threw past its own guards; keep serving the other connections.
      }
    }
  });
}

void TCPStoreServer::Impl::accept() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (!acceptor_.is_open()) return;
    if (ec) {
      // Out of descriptors: make one by closing the oldest stranger, and go on at once.
      if ((ec == asio::error::no_descriptors || ec.value() == ENFILE) && close_oldest_unauthenticated(nullptr))
        return accept();
      // Otherwise (or with nobody on probation) back off briefly instead of spinning.
      accept_retry_.expires_after(std::chrono::milliseconds(50));
      accept_retry_.async_wait([this](const boost::system::error_code& e) {
        if (!e) accept();
      });
      return;
    }
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    const auto remote = socket.remote_endpoint(ignored);
    std::string peer = remote.address().to_string();
    // Make room on probation before the newcomer joins it.
    while (probation_per_peer_[peer] >= options_.max_unauthenticated_per_peer && close_oldest_unauthenticated(&peer)) {
    }
    while (probation_.size() >= max_unauthenticated_ && close_oldest_unauthenticated(nullptr)) {
    }
    auto s = std::make_shared<Session>(*this, std::move(socket), std::move(peer));
    sessions_.emplace(s.get(), s);
    s->start();
    accept();
  });
}

void TCPStoreServer::Impl::stop() {
  if (stopped_.exchange(true)) return;
  asio::post(io_, [this] {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    accept_retry_.cancel();
    std::vector<std::shared_ptr<Session>> live;
    for (auto& [p, w] : sessions_)
      if (auto s = w.lock()) live.push_back(s);
    for (auto& s : live) s->close();
    io_.stop();
  });
  if (thread_.joinable()) thread_.join();
}

void TCPStoreServer::Impl::session_closed(Session* s) {
  if (sessions_.erase(s)) num_connections_.fetch_sub(1);
}

void TCPStoreServer::Impl::probation_begin(Session* s, const std::string& peer) {
  s->probation_pos = probation_.insert(probation_.end(), Probation{s, peer});
  ++probation_per_peer_[peer];
  num_unauthenticated_.store(probation_.size());
}

void TCPStoreServer::Impl::probation_end(Session* s) {
  auto it = probation_per_peer_.find(s->probation_pos->peer);
  if (it != probation_per_peer_.end() && --it->second == 0) probation_per_peer_.erase(it);
  probation_.erase(s->probation_pos);
  num_unauthenticated_.store(probation_.size());
}

bool TCPStoreServer::Impl::close_oldest_unauthenticated(const std::string* peer) {
  for (auto& p : probation_) {
    if (peer != nullptr && p.peer != *peer) continue;
    p.session->close();  // leaves probation_ through probation_end
    return true;
  }
  return false;
}

void TCPStoreServer::Impl::insert(const std::string& key, std::vector<uint8_t> value) {
  auto [it, inserted] = data_.insert_or_assign(key, std::move(value));
  if (inserted && is_internal_key(key)) ++num_internal_keys_;
}

bool TCPStoreServer::Impl::erase(const std::string& key) {
  if (data_.erase(key) == 0) return false;
  if (is_internal_key(key)) --num_internal_keys_;
  return true;
}

void TCPStoreServer::Impl::park(const std::shared_ptr<Waiter>& w) {
  for (const auto& k : w->missing) waiters_[k].push_back(w);
}

void TCPStoreServer::Impl::unpark(const std::shared_ptr<Waiter>& w) {
  for (const auto& k : w->missing) {
    auto it = waiters_.find(k);
    if (it == waiters_.end()) continue;
    std::erase(it->second, w);
    if (it->second.empty()) waiters_.erase(it);
  }
}

void TCPStoreServer::Impl::key_written(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::vector<std::shared_ptr<Waiter>> list = std::move(it->second);
  waiters_.erase(it);
  for (auto& w : list) {
    if (!w->active) continue;
    w->missing.erase(key);
    if (!w->missing.empty()) continue;
    w->active = false;
    if (w->is_get) w->value = data_.at(w->get_key);
    // Deferred so a write never runs another connection's queue inside its own handler.
    if (auto s = w->session.lock())
      asio::post(io_, [s, w] { s->resume(w); });
  }
}

// ---- TCPStoreServer ---------------------------------------------------------------

std::string make_store_token() {
  std::random_device rd;  // /dev/urandom
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (int i = 0; i < 8; ++i) {
    uint32_t v = rd();
    for (int j = 0; j < 8; ++j, v >>= 4) token.push_back(kHex[v & 15]);
  }
  return token;
}

TCPStoreServer::TCPStoreServer(TCPStoreServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

TCPStoreServer::~TCPStoreServer() = default;

uint16_t TCPStoreServer::port() const { return impl_->port(); }
const std::string& TCPStoreServer::bind_address() const { return impl_->bind_address(); }
void TCPStoreServer::stop() { impl_->stop(); }
size_t TCPStoreServer::num_connections() const { return impl_->num_connections(); }
size_t TCPStoreServer::num_unauthenticated() const { return impl_->num_unauthenticated(); }

}  // namespace ember::parallel
