// Same-host shared memory of the tcp backend: when every rank of a group runs on this host,
// each rank owns one POSIX shared-memory segment (a control block plus a data area) and maps
// every peer's, so all_reduce moves its data with plain loads and stores between the ranks'
// address spaces: no system call per byte, no kernel copy, no page pinning. The ranks signal
// each other through counters in the control blocks, waiting on them with futexes. See
// Note [Shared-memory all_reduce] in tcp/all_reduce.cpp. SharedMemory::create() decides it
// once per group; the object is used by the group's collective worker thread only.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parallel/distributed/store.h"
#include "parallel/distributed/tcp/detail/op_header.h"
#include "parallel/distributed/tcp/detail/socket.h"

namespace ember::parallel::tcp::detail {

class GroupState;

/// The head of each rank's segment. Each counter is the last round (all_reduce block) that
/// reached that point on the owning rank; only the owner writes them, peers read and wait.
/// Each sits on its own cache line so that a peer's polling does not slow the owner's writes.
struct ShmControl {
  alignas(64) std::atomic<uint32_t> posted{0};   // its copy of the round's input is in data
  alignas(64) std::atomic<uint32_t> reduced{0};  // its chunk of the round is reduced, in data
  alignas(64) std::atomic<uint32_t> done{0};     // it finished reading the peers' data areas
  alignas(64) std::atomic<uint32_t> aborted{0};  // nonzero: its group broke
  // Peers asleep (or about to sleep) on one of this block's counters: publish() makes the
  // wake-up system call only when some are, see SharedMemory::publish.
  alignas(64) std::atomic<uint32_t> sleepers{0};
  // The collective its worker runs now, of every kind (SharedMemory::enter): task number
  // << 32 | (seq mod 2^24) << 8 | OpType. Lets a rank in an all_reduce see that a peer is in
  // another collective (which runs on the sockets) instead of waiting for it until the timeout.
  alignas(64) std::atomic<uint64_t> entered{0};
  // The round's collective, valid once posted, in slot round % 2: a rank may post round k
  // while a peer still compares round k-1's header (Note [Small shared-memory all_reduce]).
  alignas(64) OpHeader header[2];
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be lock-free");

class SharedMemory {
 public:
  /// Collective: every rank of the group calls it at construction, after the mesh is
  /// connected (keys under "tcp/shm/"). Returns null when the path is off (`enabled` false,
  /// EMBER_TCP_SHM=0, a rank on another host, or a segment that could not be made or mapped
  /// on any rank): all ranks then agree to use the other paths. `data_bytes` per rank.
  static std::unique_ptr<SharedMemory> create(Store& store, int rank, int size, bool enabled, size_t data_bytes,
                                              int64_t timeout_ms);
  ~SharedMemory();
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  ShmControl& control(int rank) { return *reinterpret_cast<ShmControl*>(maps_[static_cast<size_t>(rank)]); }
  uint8_t* data(int rank) { return static_cast<uint8_t*>(maps_[static_cast<size_t>(rank)]) + kDataOffset; }
  size_t data_bytes() const { return data_bytes_; }
  /// The round counter of this rank's all_reduce blocks (worker thread only).
  uint32_t next_round() { return ++round_; }
  /// The last round that used the whole data area (the others used half round % 2 of it).
  uint32_t last_whole_round() const { return whole_round_; }
  void set_last_whole_round(uint32_t k) { whole_round_ = k; }
  /// Records that this rank's worker starts collective `seq` of `type` (every collective, on
  /// whichever path it runs), for the peers' desync check in wait_for.
  void enter(OpType type, uint64_t seq);

  /// Stores `value` into this rank's counter `word` and wakes the peers asleep on it.
  void publish(std::atomic<uint32_t>& word, uint32_t value);
  /// Marks this rank's segment aborted and wakes everyone waiting on it.
  void mark_aborted();

  /// Waits until `word` (in `peer`'s control block) reaches `target`. Returns "" when it did,
  /// else why not: the peer runs another collective than `running` (this rank's all_reduce)
  /// at the same point, the peer's group broke, its connection `peer_socket` closed (it died),
  /// `deadline` passed ("timed out"), or this rank's own group broke (`state`).
  /// `timeout_ms` only words the message. Polls for up to EMBER_TCP_SHM_SPIN_US microseconds
  /// (default 20) before it sleeps on the futex.
  std::string wait_for(int peer, std::atomic<uint32_t>& word, uint32_t target, const OpHeader& running,
                       Socket& peer_socket, Clock::time_point deadline, int64_t timeout_ms, const GroupState& state);

  static constexpr size_t kDataOffset = 4096;

 private:
  SharedMemory() = default;
  std::vector<void*> maps_;  // every rank's segment, mapped here (index = rank)
  size_t map_bytes_ = 0;
  size_t data_bytes_ = 0;
  int rank_ = 0;
  std::string own_name_;     // this rank's segment name until it is unlinked
  uint32_t round_ = 0;
  uint32_t whole_round_ = 0;
  uint32_t tasks_ = 0;
};

}  // namespace ember::parallel::tcp::detail
