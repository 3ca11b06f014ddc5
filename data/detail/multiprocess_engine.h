// MultiprocessEngine: the type-erased part of a DataLoader with num_workers > 0. It forks the
// workers, sends each batch's sample indices to worker (batch % num_workers), keeps
// prefetch_factor * num_workers batches in flight, maps the shared-memory batches that come
// back and hands them out in sampler order, and turns worker exceptions, deaths and timeouts
// into ember errors. See Note [DataLoader workers] in multiprocess_engine.cpp.
// Not thread-safe: one thread drives an engine (the DataLoader iterator's).
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error_code.h"
#include "core/tensor.h"
#include "data/batch_codec.h"
#include "data/detail/shm_segment.h"
#include "data/detail/worker_process.h"

namespace ember::data::detail {

/// What a worker process runs; all three are called only inside the worker.
struct WorkerBody {
  std::function<void(int worker_id)> init;  // after seeding: the user's worker_init_fn
  std::function<void()> reset;              // start of an epoch (IterableDataset::reset)
  /// Fetches and collates one batch; std::nullopt when an iterable dataset is exhausted.
  std::function<std::optional<BatchEncoder>(const std::vector<size_t>& indices)> fetch;
};

/// One batch as it arrives: tensors viewing a shared-memory mapping, and the structure bytes.
struct RawBatch {
  std::vector<Tensor> tensors;
  std::string meta;
};

struct EngineOptions {
  int num_workers = 1;
  int prefetch_factor = 2;
  int64_t timeout_ms = 0;  // 0: wait forever
  bool iterable = false;   // batches are requested blindly until every worker is exhausted
};

class MultiprocessEngine {
 public:
  MultiprocessEngine(EngineOptions options, void* dataset, WorkerBody body);
  MultiprocessEngine(const MultiprocessEngine&) = delete;
  MultiprocessEngine& operator=(const MultiprocessEngine&) = delete;
  /// Shuts down: reaps every worker.
  ~MultiprocessEngine();

  bool started() const { return !workers_.empty(); }
  /// Forks the workers; worker i seeds ember's default CPU generator with base_seed + i.
  void start(uint64_t base_seed);
  /// Starts an epoch over explicit batches (map-style) or, when iterable, an open-ended one.
  /// Requires start() and no epoch in progress.
  void begin_epoch(std::vector<std::vector<size_t>> batches);
  /// The next batch in order; std::nullopt at the end of the epoch. Throws ember::Error for a
  /// worker's exception (the iterator stays usable), and ember::Error / TimeoutError for a
  /// dead worker or a timeout (the engine is shut down and every later call throws).
  std::optional<RawBatch> next();
  /// Ends the epoch early. keep_workers: wait for the batches in flight, discard them, and keep
  /// the workers for the next epoch (falls back to shutdown on trouble). Otherwise shut down.
  void end_epoch(bool keep_workers);
  /// Reaps every worker. Workers get grace_ms to exit on their own (they do at once unless busy with a batch), then SIGKILL.
  void shutdown(int grace_ms = 1000) noexcept;

  uint64_t id() const { return id_; }
  std::vector<pid_t> worker_pids() const;

 private:
  enum class SlotKind { kBatch, kError, kExhausted };
  struct Slot {
    SlotKind kind = SlotKind::kBatch;
    RawBatch batch;
    ErrorCode error_code = ErrorCode::kError;
    std::string message;
    std::string where;  // Error::where() of the worker's error
    int worker = 0;
  };

  void dispatch();
  bool epoch_done() const;
  void wait_for_results(uint64_t awaited_id);
  // Receives one frame from worker w; false when its socket reached end-of-stream.
  bool receive_from(int w, bool discard);
  [[noreturn]] void fail_dead_worker(int w);
  // Shuts down, marks the engine broken and throws `message` as the exception of `code`.
  [[noreturn]] void fail(const std::string& message, ErrorCode code);
  std::string worker_name(int w) const;

  EngineOptions options_;
  void* dataset_;
  WorkerBody body_;
  uint64_t id_;
  std::vector<std::unique_ptr<WorkerProcess>> workers_;

  // Epoch state (batch ids are global across epochs of this engine).
  bool in_epoch_ = false;
  std::vector<std::vector<size_t>> batches_;
  uint64_t epoch_base_ = 0;   // id of the epoch's first batch
  uint64_t next_send_ = 0;    // relative to epoch_base_
  uint64_t next_recv_ = 0;
  uint64_t inflight_ = 0;
  std::vector<std::deque<uint64_t>> pending_;  // per worker: ids sent, not yet answered
  std::vector<bool> active_;                   // iterable: not yet exhausted
  size_t rr_ = 0;                              // iterable: next worker to ask
  std::map<uint64_t, Slot> reorder_;
  std::optional<std::string> broken_;          // set once the engine failed fatally
};

}  // namespace ember::data::detail
