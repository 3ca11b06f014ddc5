#include "parallel/distributed/torch_tcp_store.h"

#include <unistd.h>

#include <cstdio>

#include "core/error.h"
#include "parallel/distributed/detail/client_connection.h"

namespace ember::parallel {

// Note [PyTorch TCPStore protocol]
// PyTorch's TCPStore (torch/csrc/distributed/c10d/TCPStore*.cpp) has no frames: a request is
// a u8 query code followed by its fields, written back to back. Integers are in the host's
// byte order (little-endian on every machine PyTorch runs this on; we write and read
// little-endian explicitly). A string or byte vector is a u64 length and the bytes; a key
// list is a u64 count and that many strings. The server answers some queries:
//   SET key value                 -> (nothing)
//   COMPARE_SET key expected new  -> bytes: the value afterwards (expected, for a missing
//                                    key and a non-empty expected: nothing is stored)
//   GET key                       -> bytes   (the key must exist: clients WAIT first)
//   ADD key i64                   -> i64 new value; the value is kept as decimal text
//   CHECK keys                    -> u8 0 all present, 1 not
//   WAIT keys                     -> u8 0 (STOP_WAITING), sent once every key exists
//   GETNUMKEYS                    -> i64, every key in the server
//   DELETE_KEY key                -> i64 number deleted (0 or 1)
// Query codes. PyTorch 1.13 and 2.0 ("v1"): SET 0, COMPARE_SET 1, GET 2, ADD 3, CHECK 4,
// WAIT 5, GETNUMKEYS 6, WATCH_KEY 7, DELETE_KEY 8; no handshake. PyTorch 2.1 and later
// ("v2") put VALIDATE first and drop WATCH_KEY: VALIDATE 0, SET 1, COMPARE_SET 2, GET 3,
// ADD 4, CHECK 5, WAIT 6, GETNUMKEYS 7, DELETE_KEY 8, ..., PING 13; a v2 client opens every
// connection with VALIDATE u32 0x3C85F7CE (no answer), and PING u32 nonce is answered with
// the nonce.
// PyTorch's clients put "/" before every key, so ember does too: ember's key "k" is the key
// "k" a Python client sees. The server has no error replies: a request it cannot serve (GET
// of a missing key, ADD on a value that is not an integer, an unknown code) makes it close
// that connection. A client that gives up waiting closes its connection and the server
// forgets the parked WAIT (checked against 1.13's server: it serves the others on).
// Finding the version (kAuto), on the first connection: send v2's VALIDATE and a PING. A v2
// server echoes the nonce. A v1 server reads VALIDATE as SET and the next eight bytes (the
// magic, PING's code, three bytes of nonce) as the key's length; the nonce's third byte is
// 0xE5, which makes that length exceed what a vector can hold, so the v1 server fails the
// request at once and closes the connection (rather than waiting for more bytes). Then a
// fresh connection asks v1's GETNUMKEYS, answered with a count. Last, for 2.1-2.2 servers
// that know no PING, VALIDATE + v2's GETNUMKEYS. Anything else is an error showing the bytes.

namespace {

using detail::ClientConnection;

enum class Query { kSet, kCompareSet, kGet, kAdd, kCheck, kWait, kNumKeys, kDelete };

uint8_t query_code(TorchStoreProtocol p, Query q) {
  static constexpr uint8_t kV1Codes[] = {0, 1, 2, 3, 4, 5, 6, 8};
  static constexpr uint8_t kV2Codes[] = {1, 2, 3, 4, 5, 6, 7, 8};
  return (p == TorchStoreProtocol::kV1 ? kV1Codes : kV2Codes)[static_cast<int>(q)];
}

constexpr uint8_t kV2Validate = 0;
constexpr uint32_t kV2ValidateMagic = 0x3C85F7CE;
constexpr uint8_t kV2Ping = 13;
constexpr uint8_t kCheckReady = 0;
constexpr uint8_t kWaitStopWaiting = 0;
const std::string kKeyPrefix = "/";
// A reply's bytes come from a server we trust no more than a network; cap them.
constexpr uint64_t kMaxReplyBytes = uint64_t{1} << 30;
// A key count above this is no key count: the bytes came from something else.
constexpr int64_t kMaxPlausibleKeys = int64_t{1} << 40;
// How long a probe waits for an answer during detection.
constexpr int64_t kProbeTimeoutMs = 5000;

class Request {
 public:
  explicit Request(uint8_t code) { buf_.push_back(code); }
  Request& u32(uint32_t v) { return le(v, 4); }
  Request& u64(uint64_t v) { return le(v, 8); }
  Request& i64(int64_t v) { return le(static_cast<uint64_t>(v), 8); }
  Request& str(const std::string& s) {
    u64(s.size());
    buf_.insert(buf_.end(), s.begin(), s.end());
    return *this;
  }
  Request& bytes(const std::vector<uint8_t>& v) {
    u64(v.size());
    buf_.insert(buf_.end(), v.begin(), v.end());
    return *this;
  }
  Request& then(const Request& next) {
    buf_.insert(buf_.end(), next.buf_.begin(), next.buf_.end());
    return *this;
  }
  const std::vector<uint8_t>& data() const { return buf_; }

 private:
  Request& le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  std::vector<uint8_t> buf_;
};

uint64_t decode_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string show_bytes(const uint8_t* p, size_t n) {
  if (n == 0) return "no bytes";
  std::string hex, text;
  char b[4];
  for (size_t i = 0; i < n && i < 16; ++i) {
    std::snprintf(b, sizeof b, "%02x", p[i]);
    if (i > 0) hex += ' ';
    hex += b;
    text += (p[i] >= 32 && p[i] < 127) ? static_cast<char>(p[i]) : '.';
  }
  return std::to_string(n) + " bytes " + hex + " (\"" + text + "\")";
}

std::string quoted(const std::string& key) { return "'" + key + "'"; }

Request v2_validate() { return Request(kV2Validate).u32(kV2ValidateMagic); }

}  // namespace

const char* torch_store_protocol_name(TorchStoreProtocol p) {
  switch (p) {
    case TorchStoreProtocol::kV1:
      return "PyTorch 1.13-2.0";
    case TorchStoreProtocol::kV2:
      return "PyTorch >= 2.1";
    case TorchStoreProtocol::kAuto:
      break;
  }
  return "auto";
}

// One request/reply exchange on a pooled connection. The connection goes back to the pool
// only when the exchange completed (finish()); on any failure it is dropped (closed), so a
// half-read reply never confuses a later call.
class TorchTCPStore::Call {
 public:
  Call(TorchTCPStore& store, std::string what, int64_t timeout_ms)
      : store_(store), what_(std::move(what)), timeout_ms_(timeout_ms),
        deadline_(detail::deadline_after(timeout_ms)) {
    {
      std::lock_guard<std::mutex> lock(store_.pool_mutex_);
      if (!store_.idle_.empty()) {
        conn_ = std::move(store_.idle_.back());
        store_.idle_.pop_back();
      }
    }
    if (!conn_) conn_ = store_.connect(timeout_ms, /*retry_until_deadline=*/false);
  }

  void send(const Request& r) { check(conn_->send(r.data().data(), r.data().size(), deadline_)); }
  uint8_t u8() {
    uint8_t b = 0;
    check(conn_->receive(&b, 1, deadline_));
    return b;
  }
  int64_t i64() {
    uint8_t b[8];
    check(conn_->receive(b, 8, deadline_));
    return static_cast<int64_t>(decode_le(b, 8));
  }
  std::vector<uint8_t> bytes() {
    const uint64_t n = static_cast<uint64_t>(i64());
    if (n > kMaxReplyBytes)
      EMBER_THROW(DistributedError, what_, ": the PyTorch store at", store_.where(), " announced a ", n,
                  "-byte value; expected at most ", kMaxReplyBytes, " (is it a PyTorch TCPStore?)");
    std::vector<uint8_t> v(n);
    if (n > 0) check(conn_->receive(v.data(), n, deadline_));
    return v;
  }
  /// A one-byte reply that must be `expected`.
  void expect_u8(uint8_t expected, const char* name) {
    const uint8_t got = u8();
    if (got != expected)
      EMBER_THROW(DistributedError, what_, ": the PyTorch store at", store_.where(), " answered ", int(got),
                  "; expected ", int(expected), " (", name, ")");
  }
  void finish() { store_.give_back(std::move(conn_)); }

 private:
  void check(ClientConnection::Result r) {
    if (r == ClientConnection::Result::kOk) return;
    if (r == ClientConnection::Result::kTimeout)
      EMBER_THROW(TimeoutError, what_, ": timed out after ", timeout_ms_, " ms (PyTorch store at", store_.where(),
                  ")");
    EMBER_THROW(DistributedError, what_, ": lost the connection to the PyTorch store at", store_.where(), " (",
                conn_->message(),
                "). Its server closes the connection on a request it cannot serve (add() on a value that is "
                "no integer) and goes away with its process (torchrun's agent)");
  }

  TorchTCPStore& store_;
  std::string what_;
  int64_t timeout_ms_;
  ClientConnection::Clock::time_point deadline_;
  ConnectionPtr conn_;
};

TorchTCPStore::TorchTCPStore(std::string host, uint16_t port, TorchTCPStoreOptions options)
    : Store(options.timeout_ms), host_(std::move(host)), port_(port), protocol_(options.protocol) {
  EMBER_CHECK_T(ValueError, port != 0, "TorchTCPStore: needs the server's port, got 0");
  EMBER_CHECK_T(ValueError, !host_.empty(), "TorchTCPStore: host must not be empty");
  if (protocol_ == TorchStoreProtocol::kAuto) {
    protocol_ = detect(timeout());
  } else {
    give_back(connect(timeout(), /*retry_until_deadline=*/true));
  }
}

TorchTCPStore::~TorchTCPStore() = default;

std::string TorchTCPStore::where() const { return " " + host_ + ":" + std::to_string(port_); }

void TorchTCPStore::give_back(ConnectionPtr conn) {
  constexpr size_t kMaxIdleConnections = 8;
  std::lock_guard<std::mutex> lock(pool_mutex_);
  if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(conn));
}

TorchTCPStore::ConnectionPtr TorchTCPStore::connect(int64_t timeout_ms, bool retry_until_deadline) {
  const auto deadline = detail::deadline_after(timeout_ms);
  auto conn = std::make_unique<ClientConnection>();
  const auto r = retry_until_deadline ? conn->connect_retrying(host_, port_, deadline)
                                      : conn->connect(host_, port_, deadline);
  if (r != ClientConnection::Result::kOk)
    EMBER_THROW(DistributedError, "TorchTCPStore: could not connect to the PyTorch store at", where(),
                retry_until_deadline ? " within " + std::to_string(timeout_ms) + " ms" : std::string(), " (",
                conn->message(), "); is its server (torchrun's agent) alive?");
  if (protocol_ == TorchStoreProtocol::kV2) {
    const Request validate = v2_validate();
    if (conn->send(validate.data().data(), validate.data().size(), deadline) != ClientConnection::Result::kOk)
      EMBER_THROW(DistributedError, "TorchTCPStore: could not send the handshake to the PyTorch store at", where(),
                  " (", conn->message(), ")");
  }
  return conn;
}

TorchStoreProtocol TorchTCPStore::detect(int64_t timeout_ms) {
  // See Note [PyTorch TCPStore protocol] for why these probes and in this order.
  std::string seen;
  auto probe = [&](const Request& request, size_t reply_bytes, bool first, std::vector<uint8_t>& reply) {
    auto conn = std::make_unique<ClientConnection>();
    const auto connect_deadline = detail::deadline_after(timeout_ms);
    if ((first ? conn->connect_retrying(host_, port_, connect_deadline)
               : conn->connect(host_, port_, connect_deadline)) != ClientConnection::Result::kOk)
      EMBER_THROW(DistributedError, "TorchTCPStore: could not connect to the PyTorch store at", where(),
                  first ? " within " + std::to_string(timeout_ms) + " ms" : std::string(), " (", conn->message(),
                  "); is its server (torchrun's agent) alive?");
    const auto deadline = detail::deadline_after(std::min(timeout_ms, kProbeTimeoutMs));
    reply.assign(reply_bytes, 0);
    size_t got = 0;
    auto r = conn->send(request.data().data(), request.data().size(), deadline);
    if (r == ClientConnection::Result::kOk) r = conn->receive(reply.data(), reply_bytes, deadline, &got);
    reply.resize(r == ClientConnection::Result::kOk ? reply_bytes : got);
    if (r != ClientConnection::Result::kOk) {
      seen += r == ClientConnection::Result::kTimeout
                  ? "no answer within " + std::to_string(std::min(timeout_ms, kProbeTimeoutMs)) + " ms"
                  : conn->message();
      if (got > 0) seen += " after " + show_bytes(reply.data(), got);
      conn.reset();
    } else {
      seen += "got " + show_bytes(reply.data(), reply.size());
    }
    return conn;
  };
  auto plausible_count = [](const std::vector<uint8_t>& b) {
    const auto n = static_cast<int64_t>(decode_le(b.data(), 8));
    return n >= 0 && n < kMaxPlausibleKeys;
  };
  std::vector<uint8_t> reply;
  // 1. v2 with PING.
  const uint32_t nonce = 0x00E50000u | (static_cast<uint32_t>(::getpid()) & 0xFFFFu);
  seen = "to PyTorch >= 2.1's VALIDATE + PING: ";
  if (auto conn = probe(Request(v2_validate()).then(Request(kV2Ping).u32(nonce)), 4, true, reply)) {
    if (decode_le(reply.data(), 4) == nonce) {
      give_back(std::move(conn));
      return TorchStoreProtocol::kV2;
    }
  }
  // 2. v1: GETNUMKEYS.
  seen += ". To PyTorch 1.13-2.0's GETNUMKEYS: ";
  if (auto conn = probe(Request(query_code(TorchStoreProtocol::kV1, Query::kNumKeys)), 8, false, reply)) {
    if (plausible_count(reply)) {
      give_back(std::move(conn));
      return TorchStoreProtocol::kV1;
    }
  }
  // 3. v2 without PING (2.1-2.2): VALIDATE + GETNUMKEYS.
  seen += ". To VALIDATE + PyTorch >= 2.1's GETNUMKEYS: ";
  if (auto conn = probe(Request(v2_validate()).then(Request(query_code(TorchStoreProtocol::kV2, Query::kNumKeys))),
                        8, false, reply)) {
    if (plausible_count(reply)) {
      give_back(std::move(conn));
      return TorchStoreProtocol::kV2;
    }
  }
  EMBER_THROW(DistributedError, "TorchTCPStore: the server at", where(),
              " speaks neither PyTorch TCPStore protocol: expected PyTorch >= 2.1 to echo the 4-byte PING nonce ",
              nonce, ", or PyTorch 1.13-2.0 to answer GETNUMKEYS with an 8-byte key count. What came: ", seen,
              ". (An ember TCPStore, as ember-run or rank 0 hosts, closes such connections: then "
              "TORCHELASTIC_USE_AGENT_STORE=True should not be set.)");
}

void TorchTCPStore::set_impl(const std::string& key, const std::vector<uint8_t>& value) {
  Call call(*this, "TorchTCPStore::set(" + quoted(key) + ")", timeout());
  call.send(Request(query_code(protocol_, Query::kSet)).str(kKeyPrefix + key).bytes(value));
  call.finish();
}

std::vector<uint8_t> TorchTCPStore::get_impl(const std::string& key, int64_t timeout_ms) {
  // As PyTorch's own client: WAIT for the key, then GET it (GET of a missing key would
  // make the server close the connection).
  Call call(*this, "TorchTCPStore::get: waiting for key " + quoted(key), timeout_ms);
  call.send(Request(query_code(protocol_, Query::kWait)).u64(1).str(kKeyPrefix + key));
  call.expect_u8(kWaitStopWaiting, "STOP_WAITING");
  call.send(Request(query_code(protocol_, Query::kGet)).str(kKeyPrefix + key));
  auto value = call.bytes();
  call.finish();
  return value;
}

int64_t TorchTCPStore::add_impl(const std::string& key, int64_t delta) {
  Call call(*this, "TorchTCPStore::add(" + quoted(key) + ")", timeout());
  call.send(Request(query_code(protocol_, Query::kAdd)).str(kKeyPrefix + key).i64(delta));
  const int64_t v = call.i64();
  call.finish();
  return v;
}

std::vector<uint8_t> TorchTCPStore::compare_set_impl(const std::string& key, const std::vector<uint8_t>& expected,
                                                     const std::vector<uint8_t>& desired) {
  Call call(*this, "TorchTCPStore::compare_set(" + quoted(key) + ")", timeout());
  call.send(Request(query_code(protocol_, Query::kCompareSet)).str(kKeyPrefix + key).bytes(expected).bytes(desired));
  auto value = call.bytes();
  call.finish();
  return value;
}

namespace {
Request keys_request(uint8_t code, const std::vector<std::string>& keys) {
  Request r(code);
  r.u64(keys.size());
  for (const auto& k : keys) r.str(kKeyPrefix + k);
  return r;
}
}  // namespace

bool TorchTCPStore::check_impl(const std::vector<std::string>& keys) {
  Call call(*this, "TorchTCPStore::check(" + detail::format_keys(keys) + ")", timeout());
  call.send(keys_request(query_code(protocol_, Query::kCheck), keys));
  const uint8_t r = call.u8();
  if (r > 1)
    EMBER_THROW(DistributedError, "TorchTCPStore::check: the PyTorch store at", where(), " answered ", int(r),
                "; expected 0 (ready) or 1 (not ready)");
  call.finish();
  return r == kCheckReady;
}

void TorchTCPStore::wait_impl(const std::vector<std::string>& keys, int64_t timeout_ms) {
  Call call(*this, "TorchTCPStore::wait: waiting for keys " + detail::format_keys(keys), timeout_ms);
  call.send(keys_request(query_code(protocol_, Query::kWait), keys));
  call.expect_u8(kWaitStopWaiting, "STOP_WAITING");
  call.finish();
}

bool TorchTCPStore::delete_key_impl(const std::string& key) {
  Call call(*this, "TorchTCPStore::delete_key(" + quoted(key) + ")", timeout());
  call.send(Request(query_code(protocol_, Query::kDelete)).str(kKeyPrefix + key));
  const int64_t n = call.i64();
  call.finish();
  return n > 0;
}

int64_t TorchTCPStore::num_keys_impl() {
  Call call(*this, "TorchTCPStore::num_keys", timeout());
  call.send(Request(query_code(protocol_, Query::kNumKeys)));
  const int64_t n = call.i64();
  call.finish();
  return n;
}

}  // namespace ember::parallel
