// TCPStoreServer: the server half of TCPStore, hosted by rank 0 (inside a TCPStore with
// is_server) or by the launcher, which is not a rank. It owns one io_context run on its
// own thread; all store state lives on that thread, so no locks guard it. Hostile or
// broken connections (garbage, partial or oversized frames, a wrong token, an abrupt
// disconnect) are dropped one by one; the server keeps serving everybody else.
// Public methods are thread-safe. See Note [TCPStore protocol] in detail/wire.h.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace ember::parallel {

struct TCPStoreServerOptions {
  /// Numeric address or host name to listen on; "0.0.0.0" is every IPv4 interface.
  std::string bind_address = "0.0.0.0";
  /// 0 picks a free port; port() tells which.
  uint16_t port = 0;
  /// Shared secret every client must present first. Taken as given (the server does not
  /// read EMBER_STORE_TOKEN); empty means any client that speaks the protocol is let in.
  std::string token;
  /// A frame declaring more than this closes its connection.
  uint32_t max_frame_bytes = 64u << 20;
  /// A connection that has not authenticated within this many milliseconds is closed.
  int64_t auth_timeout_ms = 30'000;
  /// Connections not yet authenticated, in all and per peer address: a newcomer beyond
  /// either cap closes the oldest one (of its own address, for the per-peer cap). The total
  /// is also held to a quarter of the descriptor limit, so authenticated clients and the
  /// process always have descriptors left. See Note [Unauthenticated connections].
  size_t max_unauthenticated = 256;
  size_t max_unauthenticated_per_peer = 64;
};

/// A fresh 256-bit token (64 hex digits from /dev/urandom) for a server and its clients:
/// ember-run's for its jobs, rank 0's under mpirun (see parallel/README.md).
std::string make_store_token();

class TCPStoreServer {
 public:
  /// Binds, listens and starts serving. Throws DistributedError when the address cannot
  /// be bound (e.g. the port is in use).
  explicit TCPStoreServer(TCPStoreServerOptions options = {});
  /// Stops the server and closes every connection.
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  uint16_t port() const;
  const std::string& bind_address() const;
  /// Closes the listener and every connection and joins the server thread. Idempotent.
  void stop();
  /// Connections open right now, authenticated or not (for tests and diagnostics).
  size_t num_connections() const;
  /// Of those, the ones that have not authenticated yet.
  size_t num_unauthenticated() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::parallel
