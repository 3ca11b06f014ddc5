// Manager: fault-tolerant data parallelism, one per rank (torchft's Manager, in C++). Every step
// is a transaction: start_quorum() agrees with the live ranks on who takes part (through a store
// that lives outside the ranks: ember-run's), re-forms the process group when that changed and
// brings a rank that is behind (a replacement) up to date from a live peer; should_commit(),
// after the gradient reduction, tells every participant the same answer: apply the step, or
// drop it and redo it with the next quorum. See Note [Quorum protocol] in manager.cpp.
// Not thread-safe: one training loop per rank calls it; a monitor thread of its own keeps the
// heartbeat and aborts the step's collectives when a participant dies or goes silent.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "parallel/distributed/process_group.h"
#include "parallel/distributed/store.h"
#include "parallel/distributed/tcp/process_group_tcp.h"

namespace ember::parallel::ft {

/// What a rank hands a replacement: named CPU tensors (model, optimizer state, ...) and text
/// entries (sampler position, generator states, ...). The receiver's load_state_dict gets
/// tensors of the same names, dtypes and shapes, and the same entries.
struct StateDict {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;
};

struct ManagerOptions {
  /// The job's store, hosted outside the ranks (ember-run's). Required.
  std::shared_ptr<Store> store;
  /// A second connection to the same store for the monitor thread, so that its heartbeats never
  /// queue behind the training loop's waits. Null: `store`.
  std::shared_ptr<Store> monitor_store;
  /// This rank's slot, 0 <= replica_id < max_replicas: the launcher's RANK, kept by a
  /// replacement. incarnation: how many times the launcher restarted the slot.
  int replica_id = 0;
  int64_t incarnation = 0;
  int max_replicas = 1;
  /// Fewer live ranks than this: start_quorum waits up to quorum_timeout_ms, then throws.
  int min_replicas = 1;
  /// The one timeout: a participant silent (no heartbeat) this long is dropped and its kill
  /// requested; every collective and the group's rendezvous are bounded by it too.
  int64_t timeout_ms = 10'000;
  int64_t quorum_timeout_ms = 60'000;
  /// 0: timeout_ms / 20, within [50, 1000] ms. A death the launcher marks is seen at once by
  /// ranks that wait on the dead rank; the interval bounds how late a silent rank is noticed.
  int64_t heartbeat_interval_ms = 0;
  /// This rank's state, for a peer that is behind; and loading a peer's. Required.
  std::function<StateDict()> state_dict;
  std::function<void(const StateDict&)> load_state_dict;
  /// Options of every tcp group the manager forms (timeout_ms is replaced by timeout_ms above).
  ProcessGroupTCPOptions group_options;
  /// Receives one line per event (a rank dropped, a group re-formed, state received, a step
  /// dropped). Null: silent.
  std::function<void(const std::string&)> log;
};

/// The options ember-run --ft gives a rank through its environment (RANK, WORLD_SIZE,
/// MASTER_ADDR, MASTER_PORT, EMBER_STORE_TOKEN and EMBER_FT_*: parallel/ft/keys.h), with two
/// connections to ember-run's store; state_dict and load_state_dict are left to the caller.
/// Throws ValueError naming the variable that is missing or malformed (not under ember-run --ft).
ManagerOptions options_from_environment();

/// Whether this process runs under ember-run --ft (EMBER_FT=1).
bool enabled_by_environment();

class Manager {
 public:
  /// Throws ValueError for missing callbacks, a null store or slots out of range. Starts nothing:
  /// the heartbeat begins with the first start_quorum, so a rank is waited for only once it is
  /// ready to step.
  /// Not copyable or movable: it owns the monitor thread, which refers to it.
  explicit Manager(ManagerOptions options);
  ~Manager();

  /// Before each step: joins the quorum, re-forms the group if its members changed and, when
  /// this rank is behind, loads a live peer's state (or sends its own to a rank that is behind).
  /// Returns false when this attempt already failed (a participant died while the group formed
  /// or while state was sent): skip the step's work and call should_commit(), which then says
  /// false. Also false, with finished() true, when the job finished (finish()) before this rank
  /// could join: leave the training loop. Throws DistributedError when the store is lost, and TimeoutError naming the missing
  /// slots when fewer than min_replicas are live for quorum_timeout_ms.
  bool start_quorum();
  /// After the step's gradient reduction: true on every participant when all of them finished it
  /// without error (apply the optimizer step now; current_step() has advanced), false on every
  /// participant otherwise (drop the gradients; the next start_quorum redoes the step). Throws
  /// DistributedError when this rank's step failed 3 times in a row with the same participants
  /// (an error of the step itself, which redoing cannot cure).
  bool should_commit();
  /// Training is done (every participant reached the last step): a rank still waiting to join
  /// leaves start_quorum with finished() true instead of waiting for peers that left.
  void finish();
  bool finished() const { return finished_; }
  /// Marks this rank's step as failed (a collective's DistributedError): it votes against.
  void report_error(const std::string& what);

  /// The current quorum's group; rank() of num_participants(). Valid after start_quorum.
  std::shared_ptr<ProcessGroup> process_group() const { return group_; }
  int rank() const { return rank_; }
  int num_participants() const { return static_cast<int>(members_.size()); }
  /// The participants' slots in rank order.
  std::vector<int> participants() const;
  /// Committed steps (the next step to run has this index).
  int64_t current_step() const { return step_; }
  /// The quorum round (one per start_quorum that did not fail to join).
  int64_t quorum_id() const { return round_; }
  /// Whether the last start_quorum formed a new group (a DistributedDataParallel over the old
  /// one must be rebuilt over process_group()).
  bool group_changed() const { return group_changed_; }
  /// Whether the last start_quorum loaded a peer's state into this rank.
  bool recovered() const { return recovered_; }
  /// Whether this rank's current step has failed (report_error, a broken group, an abort).
  bool step_failed() const;
  int replica_id() const { return options_.replica_id; }

 private:
  struct Member {
    int slot = 0;
    int64_t incarnation = 0;
    int64_t step = 0;
  };
  struct Decision {
    int64_t group_gen = 0;
    bool fresh = false;  // a full quorum (steps known) rather than the previous members carried on
    std::vector<Member> members;
  };
  class Monitor;

  int64_t first_open_round();
  /// Round `round`'s decision: its own key, or what the commit of round - 1 carried.
  std::optional<Decision> carried_decision(int64_t round);
  Decision decide_round(int64_t round);
  std::string encode(const Decision& d) const;
  Decision decode(const std::string& text) const;
  void adopt(const Decision& d);
  void form_group(int64_t gen);
  void transfer_state(const Decision& d);
  void log(const std::string& line) const;
  std::string key(const std::string& suffix) const;
  void check_store() const;

  ManagerOptions options_;
  std::unique_ptr<Monitor> monitor_;
  std::shared_ptr<ProcessGroup> group_;
  int64_t group_gen_ = -1;
  std::vector<Member> members_;
  int rank_ = -1;
  int64_t step_ = 0;
  int64_t round_ = -1;
  bool in_step_ = false;
  bool group_changed_ = false;
  bool recovered_ = false;
  bool last_commit_failed_ = false;
  bool finished_ = false;
  // Failed steps since the last commit with the same participants; at kMaxFailuresInARow the step
  // itself is at fault (the same error every time), so should_commit throws instead of looping.
  static constexpr int kMaxFailuresInARow = 3;
  int failed_in_a_row_ = 0;
  std::string step_error_;
  std::optional<Decision> next_;  // the next round's decision, carried by the last commit
};

}  // namespace ember::parallel::ft
