#include "parallel/ft/manager.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "core/env.h"
#include "core/error.h"
#include "parallel/distributed/prefix_store.h"
#include "parallel/distributed/tcp_store.h"
#include "parallel/ft/keys.h"
#include "parallel/ft/state_transfer.h"

// Note [Quorum protocol]
// Ranks are slots 0..max_replicas-1 (the launcher's RANK; a replacement keeps its slot with the
// next incarnation). Each step is one round r of the store protocol below (keys under
// ember-ft/, the store outside the ranks):
//  - liveness: every rank's monitor thread writes hb/<slot> = "<incarnation>:<counter>" every
//    heartbeat interval and reads everyone's; a slot is live while its counter moved within the
//    ft timeout and the launcher has not written "<incarnation>:dead" there (it does so as soon
//    as it reaps the process). The same thread aborts the step's group when a participant stops
//    being live, and asks the launcher (kill/<slot>) to kill one that went silent.
//  - quorum: q/<r>/decision holds the round's participants and the group generation. A rank
//    with no decision for r writes q/<r>/join/<slot> = "<incarnation> <committed steps>
//    <needs a new group>" and waits until every live slot joined; then any of them proposes the
//    joined live slots with compare_set, so exactly one proposal wins and everyone adopts it. A
//    rank that finds itself left out (it joined late) goes on to r + 1. A newcomer starts at the
//    first round without a decision (from q/latest on).
//  - the group is re-formed (a tcp group over the prefix pg/<generation>/, generation = the
//    round that formed it, so it never meets an older group's keys) when the participants
//    changed or one of them asked; ranks with fewer committed steps than the most receive a
//    live peer's state over the new group (state_transfer.h) before the step.
//  - commit: each participant adds 1 to q/<r>/yes, or writes q/<r>/no and proposes "0". The one
//    whose add makes every participant's yes proposes "1"; a participant that finds a missing
//    vote of a slot that is no longer live proposes "0". compare_set makes q/<r>/commit one
//    answer for all: a step is applied by every participant or by none, and a dropped step is
//    redone (same global batch, split over the next quorum). When the last yes finds every live
//    slot a participant, its "1" carries round r + 1's decision (the same participants, no new
//    group), which counts as q/<r+1>/decision for everyone (a newcomer then joins r + 2), so an
//    undisturbed step costs two store round trips (the add, and the commit's compare_set or get)
//    and no quorum wait.

namespace ember::parallel::ft {

namespace {

using Clock = std::chrono::steady_clock;

// A required integer of the launcher's environment (RANK, WORLD_SIZE, MASTER_PORT, ...).
int64_t required(const char* name, int64_t lo, int64_t hi) {
  const std::optional<int64_t> v = env::integer(name, lo, hi);
  EMBER_CHECK_T(ValueError, v.has_value(), "ft: ", name, " is not set (run the job under `ember-run --ft`, which sets it)");
  return *v;
}

std::string slots_text(const std::vector<int>& slots) {
  std::string s;
  for (int x : slots) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

}  // namespace

bool enabled_by_environment() { return env::flag(kEnvEnabled, false); }

ManagerOptions options_from_environment() {
  ManagerOptions o;
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  o.max_replicas = static_cast<int>(required("WORLD_SIZE", 1, kMaxInt));
  o.replica_id = static_cast<int>(required("RANK", 0, o.max_replicas - 1));
  o.incarnation = env::integer(kEnvIncarnation, 0, std::numeric_limits<int64_t>::max()).value_or(0);
  o.timeout_ms = env::integer(kEnvTimeoutMs, 1, std::numeric_limits<int64_t>::max()).value_or(o.timeout_ms);
  o.min_replicas = static_cast<int>(env::integer(kEnvMinRanks, 1, o.max_replicas).value_or(1));
  o.quorum_timeout_ms =
      env::integer(kEnvQuorumTimeoutMs, 1, std::numeric_limits<int64_t>::max()).value_or(o.quorum_timeout_ms);
  const std::optional<std::string> addr = env::get("MASTER_ADDR");
  EMBER_CHECK_T(ValueError, addr.has_value(), "ft: MASTER_ADDR is not set (run under `ember-run --ft`)");
  const int64_t port = required("MASTER_PORT", 1, 65535);
  TCPStoreOptions so;
  so.timeout_ms = std::max<int64_t>(o.timeout_ms, 5'000);
  so.wait_for_workers = false;
  o.store = std::make_shared<TCPStore>(*addr, static_cast<uint16_t>(port), so);
  o.monitor_store = std::make_shared<TCPStore>(*addr, static_cast<uint16_t>(port), so);
  return o;
}

// ---- Monitor: heartbeat, liveness view, abort of the step's group --------------------------------

class Manager::Monitor {
 public:
  Monitor(const ManagerOptions& o, std::shared_ptr<Store> store) : o_(o), store_(std::move(store)) {
    tick();  // a first view before anyone asks for it
    thread_ = std::thread([this] { loop(); });
  }
  ~Monitor() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  /// Live slots and their incarnations, this rank's included.
  std::map<int, int64_t> live() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::map<int, int64_t> out;
    const auto now = Clock::now();
    for (const auto& [slot, v] : view_)
      if (alive_locked(v, now)) out[slot] = v.incarnation;
    out[o_.replica_id] = o_.incarnation;
    return out;
  }
  /// A slot this monitor has not observed yet counts as live (the next tick, within a heartbeat
  /// interval, tells): a participant is dropped only on evidence.
  bool alive(int slot, int64_t incarnation) {
    if (slot == o_.replica_id) return true;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = view_.find(slot);
    return it == view_.end() || (it->second.incarnation == incarnation && alive_locked(it->second, Clock::now()));
  }
  bool seen(int slot) {
    std::lock_guard<std::mutex> lock(mutex_);
    return view_.count(slot) != 0;
  }
  /// Why (slot, incarnation) is not live: "died" or "silent for N ms".
  std::string why_gone(int slot, int64_t incarnation) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = view_.find(slot);
    if (it == view_.end()) return "has no heartbeat";
    const View& v = it->second;
    if (v.incarnation != incarnation) return "was replaced (incarnation " + std::to_string(v.incarnation) + ")";
    if (v.dead) return "died (its launcher saw it exit)";
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - v.last_change).count();
    if (ms < o_.timeout_ms) return "was dropped (another rank saw it fail)";
    return "went silent for " + std::to_string(ms) + " ms (ft timeout " + std::to_string(o_.timeout_ms) + " ms)";
  }
  /// Aborts `group` (once) when one of `members` stops being live, until unwatch().
  void watch(std::vector<std::pair<int, int64_t>> members, std::shared_ptr<ProcessGroup> group) {
    std::lock_guard<std::mutex> lock(mutex_);
    watched_ = std::move(members);
    watched_group_ = std::move(group);
    abort_reason_.clear();
  }
  void unwatch() {
    std::lock_guard<std::mutex> lock(mutex_);
    watched_.clear();
    watched_group_.reset();
  }
  std::string abort_reason() {
    std::lock_guard<std::mutex> lock(mutex_);
    return abort_reason_;
  }
  /// Whether the launcher marked the slot's last incarnation seen dead.
  bool dead(int slot) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = view_.find(slot);
    return it != view_.end() && it->second.dead;
  }
  std::string store_error() {
    std::lock_guard<std::mutex> lock(mutex_);
    return store_error_;
  }
  /// Rank 0 records the round it adopted, where a newcomer starts looking (q/latest).
  void note_round(int64_t round) {
    std::lock_guard<std::mutex> lock(mutex_);
    latest_round_ = round;
  }
  /// Reads the heartbeats of `slots` now (the quorum and the commit use it while they wait, so
  /// a death the launcher marked counts at once, not at the next tick).
  void refresh(const std::vector<int>& slots) {
    std::map<int, std::optional<std::string>> seen;
    for (int s : slots)
      if (s != o_.replica_id) seen[s] = peek(*store_, heartbeat_key(s));
    observe(seen);
  }


 private:
  struct View {
    int64_t incarnation = -1;
    int64_t counter = -1;
    bool dead = false;
    Clock::time_point last_change;
  };
  bool alive_locked(const View& v, Clock::time_point now) const {
    return !v.dead && now - v.last_change < std::chrono::milliseconds(o_.timeout_ms);
  }

  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(o_.heartbeat_interval_ms));
      if (stop_ || !store_error_.empty()) continue;
      lock.unlock();
      tick();
      lock.lock();
    }
  }

  void tick() {
    try {
      store_->set(heartbeat_key(o_.replica_id), std::to_string(o_.incarnation) + ":" + std::to_string(++counter_));
      std::map<int, std::optional<std::string>> seen;
      for (int s = 0; s < o_.max_replicas; ++s)
        if (s != o_.replica_id) seen[s] = peek(*store_, heartbeat_key(s));
      int64_t latest;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        latest = latest_round_;
        latest_round_ = -1;
      }
      if (latest >= 0) store_->set(std::string(kPrefix) + "q/latest", std::to_string(latest));
      observe(seen);
    } catch (const std::exception& e) {
      std::shared_ptr<ProcessGroup> group;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        store_error_ = e.what();
        group = watched_group_;
      }
      abort_group(group, std::string("ft: lost the store: ") + e.what());
    }
  }

  void observe(const std::map<int, std::optional<std::string>>& seen) {
    const auto now = Clock::now();
    std::vector<std::pair<int, int64_t>> silent;  // slot, incarnation: to be killed
    std::string reason;
    std::shared_ptr<ProcessGroup> group;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [slot, text] : seen) {
        if (!text) continue;
        const auto hb = parse_heartbeat(*text);
        if (!hb) continue;
        View& v = view_[slot];
        if (v.incarnation != hb->incarnation || v.counter != hb->counter || v.dead != hb->dead) {
          v.incarnation = hb->incarnation;
          v.counter = hb->counter;
          v.dead = hb->dead;
          v.last_change = now;
        }
      }
      // Every slot that went silent (not dead: its process may be stopped or stuck) is named for
      // its launcher to kill, once per incarnation, whether or not it takes part now.
      for (const auto& [slot, v] : view_) {
        if (v.dead || alive_locked(v, now)) continue;
        auto it = kill_requested_.try_emplace(slot, -1).first;
        if (it->second == v.incarnation) continue;
        it->second = v.incarnation;
        silent.push_back({slot, v.incarnation});
      }
      if (watched_group_ && abort_reason_.empty()) {
        for (const auto& [slot, inc] : watched_) {
          if (slot == o_.replica_id) continue;
          auto it = view_.find(slot);
          const bool ok = it == view_.end() || (it->second.incarnation == inc && alive_locked(it->second, now));
          if (ok) continue;
          if (reason.empty()) {
            reason = "slot " + std::to_string(slot) + " ";
            if (it == view_.end()) {
              reason += "has no heartbeat";
            } else if (it->second.incarnation != inc || it->second.dead) {
              reason += "died";
            } else {
              reason += "went silent for more than the ft timeout (" + std::to_string(o_.timeout_ms) + " ms)";
            }
          }
        }
        if (!reason.empty()) {
          abort_reason_ = reason;
          group = watched_group_;
        }
      }
    }
    for (const auto& [slot, inc] : silent) store_->set(kill_key(slot), std::to_string(inc));
    if (group) abort_group(group, reason);
  }

  static void abort_group(const std::shared_ptr<ProcessGroup>& group, const std::string& reason) {
    if (auto* tcp = dynamic_cast<ProcessGroupTCP*>(group.get())) tcp->abort(reason);
  }

  const ManagerOptions& o_;
  std::shared_ptr<Store> store_;
  int64_t counter_ = 0;  // monitor thread only (and the constructor, before it starts)
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;                                  // guarded by mutex_
  std::map<int, View> view_;                           // guarded by mutex_
  std::map<int, int64_t> kill_requested_;              // guarded by mutex_: slot -> incarnation
  std::vector<std::pair<int, int64_t>> watched_;       // guarded by mutex_
  std::shared_ptr<ProcessGroup> watched_group_;        // guarded by mutex_
  std::string abort_reason_;                           // guarded by mutex_
  std::string store_error_;                            // guarded by mutex_
  int64_t latest_round_ = -1;                          // guarded by mutex_
  std::thread thread_;
};

// ---- Manager -------------------------------------------------------------------------------------

Manager::Manager(ManagerOptions options) : options_(std::move(options)) {
  EMBER_CHECK_T(ValueError, options_.store != nullptr, "ft::Manager: store is null");
  EMBER_CHECK_T(ValueError, options_.state_dict && options_.load_state_dict,
                "ft::Manager: state_dict and load_state_dict are required (a replacement loads a peer's state)");
  EMBER_CHECK_T(ValueError, options_.max_replicas >= 1, "ft::Manager: max_replicas must be at least 1, got ",
                options_.max_replicas);
  EMBER_CHECK_T(ValueError, options_.replica_id >= 0 && options_.replica_id < options_.max_replicas,
                "ft::Manager: replica_id must be in [0, ", options_.max_replicas, "), got ", options_.replica_id);
  EMBER_CHECK_T(ValueError, options_.min_replicas >= 1 && options_.min_replicas <= options_.max_replicas,
                "ft::Manager: min_replicas must be in [1, ", options_.max_replicas, "], got ", options_.min_replicas);
  EMBER_CHECK_T(ValueError, options_.timeout_ms > 0 && options_.quorum_timeout_ms > 0 &&
                                options_.heartbeat_interval_ms >= 0,
                "ft::Manager: timeout_ms and quorum_timeout_ms must be positive, heartbeat_interval_ms not negative");
  if (options_.heartbeat_interval_ms == 0)
    options_.heartbeat_interval_ms = std::clamp<int64_t>(options_.timeout_ms / 20, 50, 1000);
  options_.group_options.timeout_ms = options_.timeout_ms;
}

Manager::~Manager() {
  monitor_.reset();
  if (auto* tcp = dynamic_cast<ProcessGroupTCP*>(group_.get())) tcp->abort("the ft::Manager was destroyed");
}

std::string Manager::key(const std::string& suffix) const { return std::string(kPrefix) + suffix; }

void Manager::log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

void Manager::check_store() const {
  if (!monitor_) return;
  const std::string e = monitor_->store_error();
  if (!e.empty()) EMBER_THROW(DistributedError, "ft: slot ", options_.replica_id, " lost the quorum store: ", e);
}

std::vector<int> Manager::participants() const {
  std::vector<int> out;
  for (const auto& m : members_) out.push_back(m.slot);
  return out;
}

bool Manager::step_failed() const {
  return !step_error_.empty() || (group_ && group_->is_broken()) ||
         (monitor_ && !monitor_->abort_reason().empty());
}

void Manager::report_error(const std::string& what) {
  if (step_error_.empty()) step_error_ = what;
}

std::string Manager::encode(const Decision& d) const {
  std::ostringstream out;
  out << d.group_gen << ' ' << (d.fresh ? 1 : 0);
  for (const auto& m : d.members) out << ' ' << m.slot << ':' << m.incarnation << ':' << m.step;
  return out.str();
}

Manager::Decision Manager::decode(const std::string& text) const {
  Decision d;
  std::istringstream in(text);
  int fresh = 0;
  in >> d.group_gen >> fresh;
  d.fresh = fresh != 0;
  std::string m;
  while (in >> m) {
    Member x;
    char c1 = 0, c2 = 0;
    std::istringstream ms(m);
    ms >> x.slot >> c1 >> x.incarnation >> c2 >> x.step;
    EMBER_INTERNAL_ASSERT(c1 == ':' && c2 == ':', "ft: malformed quorum decision '", text, "'");
    d.members.push_back(x);
  }
  EMBER_INTERNAL_ASSERT(!d.members.empty(), "ft: quorum decision without members '", text, "'");
  return d;
}

std::optional<Manager::Decision> Manager::carried_decision(int64_t round) {
  Store& store = *options_.store;
  if (auto d = peek(store, key("q/" + std::to_string(round) + "/decision"))) return decode(*d);
  if (round == 0) return std::nullopt;
  const auto c = peek(store, key("q/" + std::to_string(round - 1) + "/commit"));
  if (c && c->size() > 2) return decode(c->substr(2));
  return std::nullopt;
}

int64_t Manager::first_open_round() {
  Store& store = *options_.store;
  int64_t r = 0;
  if (auto latest = peek(store, key("q/latest"))) r = std::stoll(*latest);
  while (carried_decision(r)) ++r;
  return r;
}

Manager::Decision Manager::decide_round(int64_t round) {
  Store& store = *options_.store;
  const std::string prefix = "q/" + std::to_string(round) + "/";
  const std::string decision_key = key(prefix + "decision");
  if (auto d = carried_decision(round)) return *d;
  const bool need_group = !group_ || group_->is_broken() || last_commit_failed_;
  store.set(key(prefix + "join/" + std::to_string(options_.replica_id)),
            std::to_string(options_.incarnation) + " " + std::to_string(step_) + " " + (need_group ? "1" : "0"));
  const auto entered = Clock::now();
  std::vector<int> waited_for;  // live slots that had not joined at the last look
  bool short_of_ranks = false;
  Clock::time_point short_since{};
  for (;;) {
    check_store();
    if (auto d = carried_decision(round)) return *d;
    if (peek(store, key("finished"))) {
      finished_ = true;
      return {};
    }
    if (!waited_for.empty()) monitor_->refresh(waited_for);
    std::map<int, int64_t> live = monitor_->live();
    for (const auto& m : members_)  // the last round's participants, until there is evidence
      if (!live.count(m.slot) && !monitor_->seen(m.slot)) live[m.slot] = m.incarnation;
    // The job's first round waits for every slot the launcher has not marked dead, however late
    // its heartbeat starts (up to quorum_timeout_ms, then it goes on with those that came).
    const bool first_round = round == 0 && Clock::now() - entered < std::chrono::milliseconds(options_.quorum_timeout_ms);
    if (first_round)
      for (int s = 0; s < options_.max_replicas; ++s)
        if (!live.count(s) && !monitor_->dead(s)) live[s] = -1;
    waited_for.clear();
    std::vector<Member> joined;
    std::vector<std::string> missing;
    bool any_needs_group = false;
    for (const auto& [slot, inc] : live) {
      const std::string k = key(prefix + "join/" + std::to_string(slot));
      auto v = peek(store, k);
      int64_t jinc = -1, jstep = 0;
      int jneed = 0;
      if (v) std::istringstream(*v) >> jinc >> jstep >> jneed;
      if (!v || (jinc != inc && inc >= 0)) {
        missing.push_back(k);
        waited_for.push_back(slot);
        continue;
      }
      joined.push_back({slot, jinc, jstep});
      any_needs_group = any_needs_group || jneed != 0;
    }
    const int n_live = static_cast<int>(live.size());
    if (n_live < options_.min_replicas) {
      if (!short_of_ranks) {
        short_of_ranks = true;
        short_since = Clock::now();
        std::vector<int> gone;
        for (int s = 0; s < options_.max_replicas; ++s)
          if (!live.count(s)) gone.push_back(s);
        log("ft: " + std::to_string(n_live) + " live rank(s), below --ft-min-ranks " +
            std::to_string(options_.min_replicas) + "; waiting up to " + std::to_string(options_.quorum_timeout_ms) +
            " ms for slot(s) " + slots_text(gone));
      } else if (Clock::now() - short_since > std::chrono::milliseconds(options_.quorum_timeout_ms)) {
        std::vector<int> gone;
        for (int s = 0; s < options_.max_replicas; ++s)
          if (!live.count(s)) gone.push_back(s);
        EMBER_THROW(TimeoutError, "ft: only ", n_live, " of ", options_.max_replicas, " ranks live for ",
                    options_.quorum_timeout_ms, " ms, below the minimum of ", options_.min_replicas,
                    "; missing rank slot(s) ", slots_text(gone));
      }
    } else {
      short_of_ranks = false;
      if (missing.empty()) {
        Decision d;
        d.fresh = true;
        d.members = joined;  // std::map order: by slot
        std::optional<Decision> prev;
        if (round > 0) {
          if (auto p = peek(store, key("q/" + std::to_string(round - 1) + "/decision"))) prev = decode(*p);
        }
        bool same = prev.has_value() && prev->members.size() == d.members.size();
        for (size_t i = 0; same && i < d.members.size(); ++i)
          same = prev->members[i].slot == d.members[i].slot && prev->members[i].incarnation == d.members[i].incarnation;
        d.group_gen = same && !any_needs_group ? prev->group_gen : round;
        return decode(store.compare_set(decision_key, std::string(), encode(d)));
      }
    }
    try {
      if (!missing.empty()) {
        store.wait(missing, 10);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    } catch (const TimeoutError&) {
    }
  }
}

bool Manager::start_quorum() {
  EMBER_CHECK_T(ValueError, !in_step_, "ft::Manager::start_quorum: called twice without should_commit() between");
  if (!monitor_) monitor_ = std::make_unique<Monitor>(options_, options_.monitor_store ? options_.monitor_store
                                                                                       : options_.store);
  check_store();
  step_error_.clear();
  group_changed_ = false;
  recovered_ = false;
  try {
    round_ = round_ < 0 ? first_open_round() : round_ + 1;
    for (;;) {
      std::optional<Decision> carried = std::move(next_);
      next_.reset();
      const Decision d = carried ? *carried : decide_round(round_);
      if (finished_) {
        log("ft: slot " + std::to_string(options_.replica_id) + ": the job finished before this rank joined");
        return false;
      }
      const bool in = std::any_of(d.members.begin(), d.members.end(), [&](const Member& m) {
        return m.slot == options_.replica_id && m.incarnation == options_.incarnation;
      });
      if (in) {
        adopt(d);
        break;
      }
      ++round_;
    }
  } catch (const DistributedError& e) {
    check_store();
    throw;
  }
  in_step_ = true;
  return step_error_.empty();
}

void Manager::adopt(const Decision& d) {
  const std::vector<Member> before = members_;
  members_ = d.members;
  bool same_members = before.size() == members_.size();
  for (size_t i = 0; same_members && i < before.size(); ++i)
    same_members = before[i].slot == members_[i].slot && before[i].incarnation == members_[i].incarnation;
  if (!same_members) failed_in_a_row_ = 0;
  if (!d.fresh)
    for (auto& m : members_) m.step = step_;
  rank_ = -1;
  for (size_t i = 0; i < members_.size(); ++i)
    if (members_[i].slot == options_.replica_id) rank_ = static_cast<int>(i);
  if (rank_ == 0) monitor_->note_round(round_);
  // One line per change, from the new rank 0 (every rank of a new group could say it).
  if (d.fresh && rank_ == 0) {
    std::vector<int> gone, came;
    for (const auto& b : before) {
      const bool still = std::any_of(members_.begin(), members_.end(),
                                     [&](const Member& m) { return m.slot == b.slot && m.incarnation == b.incarnation; });
      if (!still) gone.push_back(b.slot);
    }
    for (const auto& m : members_) {
      const bool was = std::any_of(before.begin(), before.end(),
                                   [&](const Member& b) { return m.slot == b.slot && m.incarnation == b.incarnation; });
      if (!was && !before.empty()) came.push_back(m.slot);
    }
    std::string line = "ft: quorum " + std::to_string(round_) + " at step " + std::to_string(step_) + ": " +
                       std::to_string(members_.size()) + " of " + std::to_string(options_.max_replicas) +
                       " ranks (slots " + slots_text(participants()) + ")";
    if (!gone.empty()) monitor_->refresh(gone);  // this rank's view may lag the decider's
    for (int s : gone) {
      const auto it = std::find_if(before.begin(), before.end(), [&](const Member& b) { return b.slot == s; });
      line += "; slot " + std::to_string(s) + " " + monitor_->why_gone(s, it->incarnation);
    }
    if (!came.empty()) line += "; slot(s) " + slots_text(came) + " joined";
    if (!gone.empty() || !came.empty() || before.empty()) log(line);
  }
  try {
    if (d.group_gen != group_gen_ || !group_) {
      const auto t0 = Clock::now();
      form_group(d.group_gen);
      group_changed_ = true;
      if (rank_ == 0 && !before.empty()) {
        log("ft: process group re-formed over " + std::to_string(members_.size()) + " ranks (generation " +
            std::to_string(d.group_gen) + ") in " +
            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()) + " ms");
      }
    }
    if (d.fresh) transfer_state(d);
  } catch (const Error& e) {
    report_error(e.what());
    log(std::string("ft: slot ") + std::to_string(options_.replica_id) + ": quorum " + std::to_string(round_) +
        " failed: " + e.what());
  }
  std::vector<std::pair<int, int64_t>> watched;
  for (const auto& m : members_) watched.push_back({m.slot, m.incarnation});
  monitor_->watch(std::move(watched), group_);
}

void Manager::form_group(int64_t gen) {
  if (auto* tcp = dynamic_cast<ProcessGroupTCP*>(group_.get())) tcp->abort("replaced by a new quorum's group");
  group_.reset();
  group_gen_ = -1;
  auto store = std::make_shared<PrefixStore>(key("pg/" + std::to_string(gen) + "/"), options_.store);
  group_ = std::make_shared<ProcessGroupTCP>(store, rank_, static_cast<int>(members_.size()), options_.group_options);
  group_gen_ = gen;
}

void Manager::transfer_state(const Decision& d) {
  int64_t max_step = 0;
  for (const auto& m : d.members) max_step = std::max(max_step, m.step);
  std::vector<int> sources, behind;  // ranks
  for (size_t i = 0; i < d.members.size(); ++i) (d.members[i].step == max_step ? sources : behind).push_back(int(i));
  if (behind.empty()) return;
  std::optional<StateDict> mine;
  for (size_t i = 0; i < behind.size(); ++i) {
    const int dst = behind[i], src = sources[i % sources.size()];
    if (src == rank_) {
      if (!mine) {
        mine = options_.state_dict();
        mine->metadata["ft.step"] = std::to_string(step_);
      }
      const auto t0 = Clock::now();
      const int64_t bytes = send_state(*group_, *mine, dst);
      log("ft: slot " + std::to_string(options_.replica_id) + " sent its state at step " + std::to_string(step_) +
          " to slot " + std::to_string(d.members[size_t(dst)].slot) + " (" + std::to_string(bytes) + " bytes in " +
          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()) + " ms)");
    } else if (dst == rank_) {
      const auto t0 = Clock::now();
      StateDict got = recv_state(*group_, src);
      auto it = got.metadata.find("ft.step");
      EMBER_CHECK_T(DistributedError, it != got.metadata.end(), "ft: the state from slot ",
                    d.members[size_t(src)].slot, " has no step");
      const int64_t step = std::stoll(it->second);
      got.metadata.erase(it);
      options_.load_state_dict(got);
      step_ = step;
      recovered_ = true;
      log("ft: slot " + std::to_string(options_.replica_id) + " (incarnation " +
          std::to_string(options_.incarnation) + ") joined at step " + std::to_string(step_) +
          ": state received from slot " + std::to_string(d.members[size_t(src)].slot) + " in " +
          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()) +
          " ms, no checkpoint read");
    }
  }
}

void Manager::finish() {
  EMBER_CHECK_T(ValueError, !in_step_, "ft::Manager::finish: a step is in progress (call should_commit() first)");
  options_.store->set(key("finished"), std::to_string(step_));
}

bool Manager::should_commit() {
  EMBER_CHECK_T(ValueError, in_step_, "ft::Manager::should_commit: no step in progress (call start_quorum() first)");
  in_step_ = false;
  Store& store = *options_.store;
  const std::string prefix = "q/" + std::to_string(round_) + "/";
  const std::string commit_key = key(prefix + "commit");
  const bool ok = !step_failed();
  const std::string why =
      !step_error_.empty() ? step_error_
                           : (group_ && group_->is_broken() ? group_->broken_reason() : monitor_->abort_reason());
  std::string result;
  try {
    if (ok) {
      const int64_t yes = store.add(key(prefix + "yes"), 1);
      if (yes == static_cast<int64_t>(members_.size())) {
        // Every participant succeeded. When every live slot is one of them, the next round is
        // theirs already (Note [Quorum protocol]).
        const std::map<int, int64_t> live = monitor_->live();
        bool same = live.size() == members_.size();
        for (const auto& m : members_) same = same && live.count(m.slot) && live.at(m.slot) == m.incarnation;
        std::string value = "1";
        if (same) {
          Decision next;
          next.group_gen = group_gen_;
          next.fresh = false;
          next.members = members_;
          value += " " + encode(next);
        }
        result = store.compare_set(commit_key, std::string(), value);
      }
    } else {
      store.set(key(prefix + "no"), std::to_string(options_.replica_id));
      result = store.compare_set(commit_key, std::string(), "0");
    }
    while (result.empty()) {
      check_store();
      try {
        const std::vector<uint8_t> v = store.get(commit_key, 20);
        result.assign(v.begin(), v.end());
        break;
      } catch (const TimeoutError&) {
      }
      bool drop = peek(store, key(prefix + "no")).has_value();
      monitor_->refresh(participants());
      for (const auto& m : members_) drop = drop || !monitor_->alive(m.slot, m.incarnation);
      if (drop) result = store.compare_set(commit_key, std::string(), "0");
    }
  } catch (const DistributedError&) {
    check_store();
    throw;
  }
  monitor_->unwatch();
  const bool commit = result[0] == '1';
  if (result.size() > 2) next_ = decode(result.substr(2));
  if (commit) {
    ++step_;
    failed_in_a_row_ = 0;
  } else if (!ok && ++failed_in_a_row_ >= kMaxFailuresInARow) {
    // The same failure with nobody gone: an error of the step itself, not of a peer.
    EMBER_THROW(DistributedError, "ft: step ", step_, " failed ", failed_in_a_row_,
                " times in a row on slot ", options_.replica_id, " while every participant stayed live; last error: ",
                why);
  } else if (rank_ == 0 || !ok) {
    log("ft: step " + std::to_string(step_) + " dropped on slot " + std::to_string(options_.replica_id) +
        (ok ? " (another rank failed)" : ": " + why) + "; the next quorum redoes it");
  }
  last_commit_failed_ = !commit;
  return commit;
}

}  // namespace ember::parallel::ft
