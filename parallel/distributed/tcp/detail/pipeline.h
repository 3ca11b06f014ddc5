// Pipeline: runs one step list of a chunked, pipelined collective between this rank and two
// ring neighbours: a list of segments to send to one peer and a list to receive from
// another. Sends go out on the Pipeline's own sender thread, receives (and the combining
// that follows each, e.g. a reduction into place) on the calling thread, so sending,
// receiving and reducing overlap (plans that send little run on the calling thread alone).
// A send may wait for a receive: send i goes out only once receive `after_recv` has been
// received and processed. See Note [Ring pipeline] in
// tcp/all_reduce.cpp. One run() at a time (the group's worker); not otherwise thread-safe.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "parallel/distributed/tcp/detail/op_header.h"
#include "parallel/distributed/tcp/detail/socket.h"

namespace ember::parallel::tcp::detail {

struct SendItem {
  const void* data = nullptr;
  size_t num_bytes = 0;
  int64_t after_recv = -1;  // index into recvs this send waits for; -1: none
};

struct RecvItem {
  void* data = nullptr;  // where the bytes land
  size_t num_bytes = 0;
  /// Send that read the memory this receive (or the combining after it) overwrites, and
  /// must have finished first; -1: none. The ring's causality already guarantees it;
  /// waiting on it makes the order explicit, also to ThreadSanitizer, which cannot see
  /// through sockets. Plans run inline honor it by their order.
  int64_t after_send = -1;
};

struct PipelinePlan {
  Socket* send_socket = nullptr;  // null: this rank sends nothing
  int send_peer = -1;
  Socket* recv_socket = nullptr;  // null: this rank receives nothing
  int recv_peer = -1;
  OpHeader header;                // sent first, and expected first from recv_peer
  std::vector<SendItem> sends;
  std::vector<RecvItem> recvs;
  /// Called on the receiving thread after recvs[i] arrived, before sends waiting on it go.
  std::function<void(size_t i)> on_received;
  Clock::time_point deadline;
};

/// How a pipeline failed: which direction, which peer, why.
struct PipelineFailure {
  bool sending = false;
  int peer = -1;
  IoResult io;              // status OK with a non-empty message: a protocol error
  std::string message;      // header mismatch, or an exception from on_received
};

/// The acknowledgement that closes a chain (broadcast, reduce): the chain's end sends the
/// operation's number to the chain's start after its last receive, and the start receives it
/// as its only data; see Note [Rooted headers] in tcp/broadcast.cpp. Lives as long as the plan.
struct ChainAck {
  explicit ChainAck(uint64_t seq) : sent(seq), expected(seq) {}
  /// Adds the send (end: after receive nseg-1) or the receive (start) to `plan`.
  void add_to(PipelinePlan& plan, bool is_start, bool is_end, size_t nseg);
  /// On the start, after the receive: throws DistributedError when it is not this operation's.
  void check(int peer) const;
  uint64_t sent;
  uint64_t received = 0;
  uint64_t expected;
};

class Pipeline {
 public:
  /// `abort` breaks the group (shutting its sockets down); run() calls it with the first
  /// failure, on the failing thread, so that the other direction stops too.
  /// Plans that send at most `inline_send_bytes` run on the calling thread alone; see run().
  Pipeline(std::function<void(const PipelineFailure&)> abort, size_t inline_send_bytes);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  /// Runs the plan to the end. Returns false and fills `failure` (the first failure of
  /// either direction) when it did not complete; both directions have stopped by then.
  bool run(PipelinePlan& plan, PipelineFailure* failure);

  /// The default for inline_send_bytes: small plans run on the calling thread alone, which
  /// saves the hand-offs to and from the sender thread that dominate small collectives. The
  /// owner must keep it well below the peers' socket receive buffers: everything a peer sent
  /// earlier has been read, so blocking sends of that size always fit and cannot deadlock.
  static constexpr size_t kInlineSendBytes = 32 << 10;

 private:
  bool run_inline(PipelinePlan& plan, PipelineFailure* failure);
  void sender_loop();
  void run_sends(PipelinePlan& plan);
  void record_failure(PipelineFailure f);

  std::function<void(const PipelineFailure&)> abort_;
  const size_t inline_send_bytes_;
  std::thread sender_;
  std::mutex mutex_;
  std::condition_variable cv_;
  PipelinePlan* plan_ = nullptr;  // guarded by mutex_: the plan the sender should run
  bool sender_busy_ = false;      // guarded by mutex_
  bool stop_ = false;             // guarded by mutex_

  // Per run: how far each direction got, and whether the run failed; each side waits for
  // the other's progress on progress_cv_.
  std::mutex progress_mutex_;
  std::condition_variable progress_cv_;
  int64_t recvs_done_ = 0;        // guarded by progress_mutex_
  int64_t sends_done_ = 0;        // guarded by progress_mutex_
  std::atomic<bool> failed_{false};
  // Waits until counter >= at_least, or the run failed.
  void wait_progress(const int64_t& counter, int64_t at_least);
  std::mutex failure_mutex_;
  bool have_failure_ = false;         // guarded by failure_mutex_
  PipelineFailure failure_;           // guarded by failure_mutex_
};

}  // namespace ember::parallel::tcp::detail
