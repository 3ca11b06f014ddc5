#include "parallel/distributed/tcp_store.h"

#include <cstdlib>
#include <map>
#include <thread>

#include "core/error.h"
#include "parallel/distributed/detail/client_connection.h"
#include "parallel/distributed/detail/wire.h"

namespace ember::parallel {

using detail::ClientConnection;
using detail::FrameReader;
using detail::FrameWriter;
using detail::Op;
using detail::Status;
using Clock = std::chrono::steady_clock;

namespace {

// Idle connections kept per TCPStore; more are opened when more threads call at once.
constexpr size_t kMaxIdleConnections = 8;

const std::string kWorkersKey = std::string(detail::kInternalKeyPrefix) + "num_workers";
const std::string kWorkersReadyKey = std::string(detail::kInternalKeyPrefix) + "workers_ready";

std::string resolve_token(const std::string& token) {
  if (!token.empty()) return token;
  const char* env = std::getenv(kStoreTokenEnv);
  return env ? std::string(env) : std::string();
}

// multi_tenant servers, by (bind address, port). Guarded by tenants_mutex().
std::mutex& tenants_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::pair<std::string, uint16_t>, std::weak_ptr<TCPStoreServer>>& tenants() {
  static std::map<std::pair<std::string, uint16_t>, std::weak_ptr<TCPStoreServer>> m;
  return m;
}

std::shared_ptr<TCPStoreServer> start_server(uint16_t port, const TCPStoreOptions& options,
                                             const std::string& token) {
  TCPStoreServerOptions server_options;
  server_options.bind_address = options.bind_address;
  server_options.port = port;
  server_options.token = token;
  if (!options.multi_tenant || port == 0)
    return std::make_shared<TCPStoreServer>(std::move(server_options));
  std::lock_guard<std::mutex> lock(tenants_mutex());
  auto& slot = tenants()[{options.bind_address, port}];
  if (auto existing = slot.lock()) return existing;
  auto server = std::make_shared<TCPStoreServer>(std::move(server_options));
  slot = server;
  return server;
}

// Where the hosting process itself connects: loopback for a wildcard bind.
std::string self_connect_host(const std::string& bind_address) {
  if (bind_address == "0.0.0.0" || bind_address.empty()) return "127.0.0.1";
  if (bind_address == "::") return "::1";
  return bind_address;
}

std::string quoted(const std::string& key) { return "'" + key + "'"; }

}  // namespace

TCPStore::TCPStore(std::string host, uint16_t port, TCPStoreOptions options)
    : Store(options.timeout_ms), host_(std::move(host)), port_(port),
      token_(resolve_token(options.token)) {
  EMBER_CHECK_T(ValueError, !options.world_size || *options.world_size > 0,
                "TCPStore: world_size must be positive, got ", options.world_size.value_or(0));
  if (options.is_server) {
    server_ = start_server(port, options, token_);
    port_ = server_->port();
    host_ = self_connect_host(options.bind_address);
  } else {
    EMBER_CHECK_T(ValueError, port != 0, "TCPStore: a client needs the server's port, got 0");
    EMBER_CHECK_T(ValueError, !host_.empty(), "TCPStore: host must not be empty");
  }
  idle_.push_back(open_connection(timeout(), /*retry_until_deadline=*/true));
  if (options.world_size && options.wait_for_workers)
    wait_for_workers(*options.world_size, options.is_server);
}

TCPStore::~TCPStore() = default;

std::string TCPStore::where() const { return " (store server " + host_ + ":" + std::to_string(port_) + ")"; }

TCPStore::ConnectionPtr TCPStore::open_connection(int64_t timeout_ms, bool retry_until_deadline) {
  const auto deadline = detail::deadline_after(timeout_ms);
  auto conn = std::make_unique<ClientConnection>();
  // Not up yet (workers usually start before rank 0 listens): retried until the deadline.
  auto r = retry_until_deadline ? conn->connect_retrying(host_, port_, deadline) : conn->connect(host_, port_, deadline);
  if (r == ClientConnection::Result::kTimeout || (r != ClientConnection::Result::kOk && retry_until_deadline))
    EMBER_THROW(DistributedError, "TCPStore: could not connect to the store server at ", host_, ":", port_,
                " within ", timeout_ms, " ms (", conn->message(), ")");
  if (r != ClientConnection::Result::kOk)
    EMBER_THROW(DistributedError, "TCPStore: cannot connect to the store server at ", host_, ":", port_, " (",
                conn->message(), "); is the server (rank 0 or ember-run) still alive?");
  std::vector<uint8_t> response;
  auto frame = FrameWriter().u8(uint8_t(Op::kAuth)).bytes(detail::kAuthMagic).bytes(token_);
  r = conn->request(std::move(frame).finish(), response, deadline);
  if (r == ClientConnection::Result::kTimeout)
    EMBER_THROW(DistributedError, "TCPStore: the store server at ", host_, ":", port_,
                " did not answer the authentication request within ", timeout_ms, " ms");
  if (r != ClientConnection::Result::kOk)
    EMBER_THROW(DistributedError, "TCPStore: the server at ", host_, ":", port_,
                " closed the connection without answering ember's store handshake (", conn->message(),
                "): expected an ember TCPStore (rank 0's or ember-run's). A PyTorch TCPStore, such as torchrun's "
                "agent hosts, does this; ranks speak PyTorch's protocol to it when TORCHELASTIC_USE_AGENT_STORE=True");
  if (response.size() == 1 && response[0] == uint8_t(Status::kAuthFailed))
    EMBER_THROW(DistributedError, "TCPStore: authentication failed with the store server at ", host_,
                ":", port_, ": the server refused this client's token (",
                token_.empty() ? "none given" : "wrong token",
                "); set ", kStoreTokenEnv, " to the token of the job's launcher or store");
  if (response.size() != 5 || response[0] != uint8_t(Status::kOk))
    EMBER_THROW(DistributedError, "TCPStore: the server at ", host_, ":", port_,
                " answered ember's store handshake with ", response.size(), " bytes starting ",
                int(response.empty() ? -1 : response[0]),
                ": expected an ember TCPStore's status byte and frame limit (5 bytes)");
  FrameReader limit(response.data() + 1, 4);
  max_frame_bytes_.store(limit.u32(), std::memory_order_relaxed);
  return conn;
}

std::vector<uint8_t> TCPStore::call(const std::string& what, std::vector<uint8_t> frame,
                                    int64_t timeout_ms) {
  // A frame over the server's limit would make it close the connection: refuse it here,
  // naming the limit, before anything is sent.
  const uint64_t payload_bytes = frame.size() - detail::kFrameHeaderBytes;
  const uint32_t limit = max_frame_bytes_.load(std::memory_order_relaxed);
  EMBER_CHECK_T(ValueError, payload_bytes <= limit, what, ": the request is ", payload_bytes,
                " bytes, over the store server's frame limit of ", limit, " bytes (",
                limit / double(1 << 20), " MiB, TCPStoreServerOptions::max_frame_bytes)", where(),
                "; keep large values out of the store (send tensors through a process group)");
  ConnectionPtr conn;
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (!idle_.empty()) {
      conn = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (!conn) conn = open_connection(timeout_ms, /*retry_until_deadline=*/false);
  std::vector<uint8_t> response;
  const auto deadline = detail::deadline_after(timeout_ms);
  switch (conn->request(frame, response, deadline)) {
    case ClientConnection::Result::kOk:
      break;
    case ClientConnection::Result::kTimeout:
      EMBER_THROW(TimeoutError, what, ": timed out after ", timeout_ms, " ms", where());
    case ClientConnection::Result::kClosed:
      EMBER_THROW(DistributedError, what, ": lost the connection to the store server at ", host_, ":",
                  port_, " (", conn->message(), "); is the server (rank 0 or ember-run) still alive?");
  }
  // The connection is in sync again whatever the status: give it back before parsing.
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(conn));
  }
  if (response.empty())
    EMBER_THROW(DistributedError, what, ": empty response from the store server", where());
  if (response[0] == uint8_t(Status::kError)) {
    std::string message;
    try {
      FrameReader r(response.data() + 1, response.size() - 1);
      message = r.string();
    } catch (const FrameReader::MalformedFrame&) {
      message = "(unreadable error message)";
    }
    EMBER_THROW(ValueError, what, ": the store server refused the request: ", message);
  }
  if (response[0] != uint8_t(Status::kOk))
    EMBER_THROW(DistributedError, what, ": unexpected response status ", int(response[0]), where());
  response.erase(response.begin());
  return response;
}

namespace {
// Parses a whole OK payload; a short or overlong one means a confused server.
template <typename F>
auto parse_response(const std::string& what, const std::vector<uint8_t>& payload, F&& read) {
  try {
    FrameReader r(payload.data(), payload.size());
    auto v = read(r);
    if (!r.at_end()) throw FrameReader::MalformedFrame{};
    return v;
  } catch (const FrameReader::MalformedFrame&) {
    EMBER_THROW(DistributedError, what, ": malformed response from the store server");
  }
}
}  // namespace

void TCPStore::set_impl(const std::string& key, const std::vector<uint8_t>& value) {
  call("TCPStore::set(" + quoted(key) + ")",
       FrameWriter().u8(uint8_t(Op::kSet)).bytes(key).bytes(value).finish(), timeout());
}

std::vector<uint8_t> TCPStore::get_impl(const std::string& key, int64_t timeout_ms) {
  const std::string what = "TCPStore::get: waiting for key " + quoted(key);
  auto payload = call(what, FrameWriter().u8(uint8_t(Op::kGet)).bytes(key).finish(), timeout_ms);
  return parse_response(what, payload, [](FrameReader& r) { return r.bytes(); });
}

int64_t TCPStore::add_impl(const std::string& key, int64_t delta) {
  const std::string what = "TCPStore::add(" + quoted(key) + ")";
  auto payload = call(what, FrameWriter().u8(uint8_t(Op::kAdd)).bytes(key).i64(delta).finish(), timeout());
  return parse_response(what, payload, [](FrameReader& r) { return r.i64(); });
}

std::vector<uint8_t> TCPStore::compare_set_impl(const std::string& key,
                                                const std::vector<uint8_t>& expected,
                                                const std::vector<uint8_t>& desired) {
  const std::string what = "TCPStore::compare_set(" + quoted(key) + ")";
  auto frame = FrameWriter().u8(uint8_t(Op::kCompareSet)).bytes(key).bytes(expected).bytes(desired);
  auto payload = call(what, std::move(frame).finish(), timeout());
  return parse_response(what, payload, [](FrameReader& r) { return r.bytes(); });
}

namespace {
std::vector<uint8_t> keys_frame(Op op, const std::vector<std::string>& keys) {
  FrameWriter w;
  w.u8(uint8_t(op)).u32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) w.bytes(k);
  return std::move(w).finish();
}
}  // namespace

bool TCPStore::check_impl(const std::vector<std::string>& keys) {
  const std::string what = "TCPStore::check(" + detail::format_keys(keys) + ")";
  auto payload = call(what, keys_frame(Op::kCheck, keys), timeout());
  return parse_response(what, payload, [](FrameReader& r) { return r.u8() != 0; });
}

void TCPStore::wait_impl(const std::vector<std::string>& keys, int64_t timeout_ms) {
  const std::string what = "TCPStore::wait: waiting for keys " + detail::format_keys(keys);
  auto payload = call(what, keys_frame(Op::kWait, keys), timeout_ms);
  parse_response(what, payload, [](FrameReader&) { return 0; });
}

bool TCPStore::delete_key_impl(const std::string& key) {
  const std::string what = "TCPStore::delete_key(" + quoted(key) + ")";
  auto payload = call(what, FrameWriter().u8(uint8_t(Op::kDelete)).bytes(key).finish(), timeout());
  return parse_response(what, payload, [](FrameReader& r) { return r.u8() != 0; });
}

int64_t TCPStore::num_keys_impl() {
  const std::string what = "TCPStore::num_keys";
  auto payload = call(what, FrameWriter().u8(uint8_t(Op::kNumKeys)).finish(), timeout());
  return parse_response(what, payload, [](FrameReader& r) { return r.i64(); });
}

void TCPStore::wait_for_workers(int world_size, bool is_server) {
  const int64_t arrived = add(kWorkersKey, 1);
  if (arrived == world_size) set(kWorkersReadyKey, std::string("1"));
  if (!is_server) return;
  try {
    wait({kWorkersReadyKey}, timeout());
  } catch (const TimeoutError&) {
    const int64_t now = add(kWorkersKey, 0);
    EMBER_THROW(TimeoutError, "TCPStore: only ", now, " of ", world_size,
                " workers connected to the store within ", timeout(), " ms", where());
  }
}

}  // namespace ember::parallel
