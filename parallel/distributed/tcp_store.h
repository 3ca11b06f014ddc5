// TCPStore: a Store served over TCP by a TCPStoreServer that rank 0 hosts (is_server) or
// that the launcher hosts (every rank a client). Each TCPStore keeps a small pool of
// authenticated connections, one per operation in flight, so any number of threads can
// use one TCPStore at once and a blocking get() in one thread never stalls another.
// Every operation has a deadline: TimeoutError names the op, the key and the timeout;
// a dead or unreachable server gives DistributedError, never a hang.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "parallel/distributed/store.h"
#include "parallel/distributed/tcp_store_server.h"

namespace ember::parallel {

namespace detail {
class ClientConnection;
}

/// The environment variable the launcher puts the shared store token in.
inline constexpr const char* kStoreTokenEnv = "EMBER_STORE_TOKEN";

struct TCPStoreOptions {
  /// Host the server in this process (listening on bind_address:port) and connect to it.
  bool is_server = false;
  /// Number of TCPStore instances in the job, the server's own included. With
  /// wait_for_workers, the server's constructor returns only once all have connected.
  std::optional<int> world_size;
  bool wait_for_workers = true;
  /// Connecting (retried until the server is up), waiting for workers, and the default
  /// for get/wait; every other request must be answered within it too.
  int64_t timeout_ms = Store::kDefaultTimeoutMs;
  /// Shared secret; empty means the value of EMBER_STORE_TOKEN (empty if unset).
  std::string token;
  /// Server only: several is_server TCPStores in one process with the same port share
  /// one server instead of failing to bind.
  bool multi_tenant = false;
  /// Server only: the address to listen on.
  std::string bind_address = "0.0.0.0";
};

class TCPStore : public Store {
 public:
  /// Connects to host:port (for a server: starts it first; port 0 picks a free port).
  /// Throws DistributedError when the server cannot be reached within timeout_ms or
  /// refuses the token ("TCPStore: authentication failed ..."), TimeoutError when the
  /// workers do not all arrive in time.
  TCPStore(std::string host, uint16_t port, TCPStoreOptions options = {});
  ~TCPStore() override;

  const std::string& host() const { return host_; }
  /// The server's port (the one picked, when constructed with port 0).
  uint16_t port() const { return port_; }
  bool is_server() const { return server_ != nullptr; }
  /// The hosted server, or null for a client.
  const std::shared_ptr<TCPStoreServer>& server() const { return server_; }

 protected:
  EMBER_STORE_HOOKS_OVERRIDE;

 private:
  using ConnectionPtr = std::unique_ptr<detail::ClientConnection>;
  // Sends one request on a pooled (or new) connection and returns the OK payload after
  // its status byte. `what` names the op and key for error messages.
  std::vector<uint8_t> call(const std::string& what, std::vector<uint8_t> frame, int64_t timeout_ms);
  ConnectionPtr open_connection(int64_t timeout_ms, bool retry_until_deadline);
  void wait_for_workers(int world_size, bool is_server);
  std::string where() const;

  std::string host_;
  uint16_t port_ = 0;
  std::string token_;
  std::shared_ptr<TCPStoreServer> server_;
  std::mutex pool_mutex_;
  std::vector<ConnectionPtr> idle_;  // guarded by pool_mutex_
  // The server's max_frame_bytes, as its handshake said; requests larger are refused.
  std::atomic<uint32_t> max_frame_bytes_{TCPStoreServerOptions{}.max_frame_bytes};
};

}  // namespace ember::parallel
