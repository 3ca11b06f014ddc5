// ProcessGroup's debugging aids (EMBER_DISTRIBUTED_DEBUG, PyTorch's TORCH_DISTRIBUTED_DEBUG):
// CollectiveFingerprint, what a rank is about to call, compared across ranks before each
// collective when the desync check is on (Note [Desync check] in process_group_debug.cpp);
// and FlightRecorder, the last N collectives a group entered with their state, dumped into
// the errors that a failure or timeout raises. Used by every backend through the base class.
// FlightRecorder is thread-safe (its own mutex); fingerprints are values.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "parallel/distributed/reduce_op.h"

namespace ember::parallel {

enum class OpType;

/// EMBER_DISTRIBUTED_DEBUG: OFF (default), INFO (flight recorder in error messages), DETAIL
/// (INFO plus the desync check before every collective).
enum class DebugLevel { kOff, kInfo, kDetail };
/// The level the environment asks for; ValueError naming the variable for an unknown value.
DebugLevel debug_level_from_env();

/// One collective call as every rank must agree on it: op, sequence number, dtype, shapes,
/// root and reduce op. Travels as kLength int64s.
struct CollectiveFingerprint {
  static constexpr int kMaxDims = 4;
  static constexpr int64_t kLength = 10 + kMaxDims;
  int64_t op = -1;
  int64_t seq = 0;
  int64_t dtype = -1;  // -1: no tensors (barrier)
  int64_t num_tensors = 0;
  int64_t numel = 0;   // all tensors together
  int64_t root = -1;
  int64_t reduce_op = -1;
  int64_t ndim = 0;    // of the first tensor
  std::vector<int64_t> dims;  // its first kMaxDims sizes

  static CollectiveFingerprint make(OpType type, uint64_t seq, const std::vector<Tensor>& tensors, int root = -1,
                                    int reduce_op = -1);
  std::vector<int64_t> encode() const;
  static CollectiveFingerprint decode(const int64_t* values);
  bool operator==(const CollectiveFingerprint& o) const;
  /// "all_reduce #7 (float32, [1024])", "broadcast #7 (float32, [512], root 0)".
  std::string str() const;
};

/// The last `capacity` collectives of one group, oldest first.
class FlightRecorder {
 public:
  explicit FlightRecorder(size_t capacity = 16) : capacity_(capacity) {}
  struct Entry {
    uint64_t seq = 0;
    std::string what;  // the fingerprint's text
    std::chrono::steady_clock::time_point start;
    std::atomic<int64_t> duration_us{-1};  // -1 while running
    std::atomic<bool> failed{false};
  };
  /// Records a collective entered now; the caller marks it finished through the entry.
  std::shared_ptr<Entry> enter(uint64_t seq, std::string what);
  /// "rank 1 entered: #5 all_reduce (...) completed in 0.2 ms; #6 broadcast (...) running for 812 ms".
  std::string dump(int rank) const;
  /// The text of the last collective entered, "" when none.
  std::string last_entered() const;

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::deque<std::shared_ptr<Entry>> entries_;  // guarded by mu_
};

}  // namespace ember::parallel
