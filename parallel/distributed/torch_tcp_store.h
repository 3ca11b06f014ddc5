// TorchTCPStore: a Store that is a client of PyTorch's TCPStore server — the store torchrun's
// agent hosts (it tells the ranks with TORCHELASTIC_USE_AGENT_STORE=True), or one made in
// Python with torch.distributed.TCPStore(..., is_master=True). It speaks PyTorch's wire
// protocol (Note [PyTorch TCPStore protocol]), of PyTorch 1.13-2.0 or of 2.1 and later,
// found out on connecting. Thread-safe: a small pool of connections, one per operation in
// flight, as TCPStore. Every operation has a deadline (TimeoutError); a lost or foreign
// server is a DistributedError that says what was expected and what arrived.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "parallel/distributed/store.h"

namespace ember::parallel {

namespace detail {
class ClientConnection;
}

enum class TorchStoreProtocol {
  kAuto,  // find out on connecting (see Note [PyTorch TCPStore protocol])
  kV1,    // PyTorch 1.13 and 2.0: no handshake
  kV2,    // PyTorch 2.1 and later: a VALIDATE handshake, query codes shifted by one
};

/// "1.13" style names for messages: "PyTorch 1.13-2.0", "PyTorch >= 2.1".
const char* torch_store_protocol_name(TorchStoreProtocol p);

struct TorchTCPStoreOptions {
  /// Connecting (retried until the server is up), and the default for get/wait; every
  /// other request must be answered within it too.
  int64_t timeout_ms = Store::kDefaultTimeoutMs;
  TorchStoreProtocol protocol = TorchStoreProtocol::kAuto;
};

class TorchTCPStore : public Store {
 public:
  /// Connects to the PyTorch TCPStore server at host:port, retrying until timeout_ms while
  /// nothing listens. Throws DistributedError when it cannot be reached, or when what
  /// answers is no PyTorch store (the message names both protocols and the bytes that came).
  TorchTCPStore(std::string host, uint16_t port, TorchTCPStoreOptions options = {});
  ~TorchTCPStore() override;

  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }
  /// The protocol in use (never kAuto once constructed).
  TorchStoreProtocol protocol() const { return protocol_; }

 protected:
  // num_keys(): every key the server holds, PyTorch's own (its agent's) included.
  EMBER_STORE_HOOKS_OVERRIDE;

 private:
  using ConnectionPtr = std::unique_ptr<detail::ClientConnection>;
  class Call;
  ConnectionPtr connect(int64_t timeout_ms, bool retry_until_deadline);
  TorchStoreProtocol detect(int64_t timeout_ms);
  void give_back(ConnectionPtr conn);
  std::string where() const;

  std::string host_;
  uint16_t port_ = 0;
  TorchStoreProtocol protocol_ = TorchStoreProtocol::kAuto;
  std::mutex pool_mutex_;
  std::vector<ConnectionPtr> idle_;  // guarded by pool_mutex_
};

}  // namespace ember::parallel
