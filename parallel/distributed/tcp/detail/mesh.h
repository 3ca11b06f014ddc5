// Mesh: the tcp backend's connections, a full mesh with kNumChannels streams per pair of
// ranks (channel 0 carries collectives, channel 1 send/recv), built through the Store.
// Each rank listens on an ephemeral port and publishes "host:port"; the higher rank of a pair
// connects to the lower. Both ends of every connection prove they read the group's secret
// (a random value rank 0 put in the store, which is itself authenticated by the launcher's
// EMBER_STORE_TOKEN): a connection without it is dropped, and rendezvous goes on.
// Built once by the group's constructor; afterwards sockets are used as Socket says.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "parallel/distributed/store.h"
#include "parallel/distributed/tcp/detail/socket.h"

namespace ember::parallel::tcp::detail {

inline constexpr int kCollectiveChannel = 0;
inline constexpr int kP2PChannel = 1;
inline constexpr int kNumChannels = 2;

struct MeshOptions {
  int rank = 0;
  int size = 1;
  std::string host;         // the address peers reach this rank at
  int buffer_bytes = 0;     // socket buffers; 0 leaves the kernel's autotuning
  int64_t timeout_ms = 0;   // for the whole rendezvous
  std::string who;          // "tcp rank 0/4", for messages
};

class Mesh {
 public:
  /// Connects to every other rank. Throws DistributedError naming the missing ranks when
  /// the mesh is not complete within the timeout (TimeoutError when a store key is missing).
  Mesh(Store& store, const MeshOptions& options);

  Socket& socket(int peer, int channel) { return sockets_[index(peer, channel)]; }
  /// "host:port" this rank listens on (what the other ranks connect to); connections this
  /// rank opens leave from the same host (see Note [Source address] in mesh.cpp).
  const std::string& address() const { return address_; }
  /// Shuts every socket down (wakes all blocked I/O). Thread-safe, idempotent.
  void shutdown_all();

 private:
  size_t index(int peer, int channel) const {
    return static_cast<size_t>(peer) * kNumChannels + static_cast<size_t>(channel);
  }
  std::vector<Socket> sockets_;  // [peer * kNumChannels + channel]; invalid for this rank
  std::string address_;         // empty for a group of one
};

/// The address peers should use for this host: EMBER_TCP_HOST if set; else the local
/// address of the route to MASTER_ADDR if set; else 127.0.0.1.
std::string default_host();

}  // namespace ember::parallel::tcp::detail
