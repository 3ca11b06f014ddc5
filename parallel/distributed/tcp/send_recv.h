// P2PEngine: the tcp backend's send/recv, on the mesh's point-to-point channel, apart from
// the collectives. One thread runs a poll() loop over every peer's connection with
// non-blocking I/O, so any number of sends and recvs to and from any peers progress at
// once (two ranks that both send first, then receive, do not deadlock). A message is one
// frame: {magic, dtype, tag, bytes} then the tensors' bytes. Frames are matched to recvs by
// (peer, tag) in order; one that arrives before its recv is kept in memory until the recv
// is posted. Any failure (peer gone, timeout, size or dtype mismatch) breaks the group.
// Thread-safe: send()/recv() may be called from any thread.
#pragma once
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "parallel/distributed/process_group.h"
#include "parallel/distributed/tcp/detail/context.h"

namespace ember::parallel::tcp {

class P2PEngine {
 public:
  P2PEngine(int rank, int size, detail::Mesh* mesh, detail::GroupState* state, int64_t timeout_ms);
  /// Fails whatever is still pending ("aborted") and stops the thread.
  ~P2PEngine();
  P2PEngine(const P2PEngine&) = delete;
  P2PEngine& operator=(const P2PEngine&) = delete;

  void send(std::shared_ptr<Work> work, const OpInfo& info, std::vector<Tensor> tensors, int dst, int tag);
  void recv(std::shared_ptr<Work> work, const OpInfo& info, std::vector<Tensor> tensors, int src, int tag);

  struct Op;
  struct Peer;

 private:
  // An Op of send() or recv(), its deadline timeout_ms from now.
  std::unique_ptr<Op> make_op(bool is_send, std::shared_ptr<Work> work, const OpInfo& info,
                              std::vector<Tensor> tensors, int peer, int tag) const;
  // Hands op to the loop thread.
  void submit(std::unique_ptr<Op> op);
  void loop();
  void adopt(std::unique_ptr<Op> op);
  bool progress_send(int peer);
  bool progress_recv(int peer);
  void deliver_stash(int peer);
  void fail_peer(int peer, const std::string& why);
  void fail_all(const std::string& why);
  void wake();

  const int rank_;
  const int size_;
  detail::Mesh* mesh_;
  detail::GroupState* state_;
  const int64_t timeout_ms_;
  int wake_fd_ = -1;
  std::thread thread_;

  std::mutex mutex_;
  std::vector<std::unique_ptr<Op>> incoming_;  // guarded by mutex_
  bool stop_ = false;                          // guarded by mutex_

  std::vector<std::unique_ptr<Peer>> peers_;   // loop thread only
};

}  // namespace ember::parallel::tcp
