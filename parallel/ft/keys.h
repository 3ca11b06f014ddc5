// The store keys a fault-tolerant job (parallel/ft/manager.h) shares with its launcher: the
// launcher marks a rank slot's dead incarnation in the rank's heartbeat key and reads the kill
// requests of ranks that saw a slot hang. Header-only and tensor-free, so ember-run includes it
// without linking the tensor stack. Every key lives under kPrefix in the job's store.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "parallel/distributed/store.h"

namespace ember::parallel::ft {

inline constexpr const char* kPrefix = "ember-ft/";

/// "<incarnation>:<counter>" written by the rank every heartbeat interval, or
/// "<incarnation>:dead" written by the launcher once that incarnation exited.
inline std::string heartbeat_key(int slot) { return std::string(kPrefix) + "hb/" + std::to_string(slot); }
/// "<incarnation>": a rank asks the launcher to kill that incarnation of `slot` (it went silent
/// past the ft timeout while its peers waited on it).
inline std::string kill_key(int slot) { return std::string(kPrefix) + "kill/" + std::to_string(slot); }

/// A counter the launcher adds 1 to for every start of `slot`'s process: its value less one is
/// that start's incarnation, unique across launchers (a node's ember-run started again after
/// the last one died goes on counting where that one stopped).
inline std::string incarnation_key(int slot) { return std::string(kPrefix) + "incarnation/" + std::to_string(slot); }
/// Written by node `node`'s launcher once all its ranks exited with success: node 0's launcher,
/// which hosts the store, keeps it up until every other node wrote it or went silent.
inline std::string node_done_key(int node) { return std::string(kPrefix) + "node-done/" + std::to_string(node); }

inline std::string dead_heartbeat(int64_t incarnation) { return std::to_string(incarnation) + ":dead"; }

/// A heartbeat value parsed: incarnation and counter (dead: the launcher's mark).
struct Heartbeat {
  int64_t incarnation = 0;
  int64_t counter = 0;
  bool dead = false;
};
inline std::optional<Heartbeat> parse_heartbeat(const std::string& v) {
  const size_t colon = v.find(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  Heartbeat h;
  try {
    h.incarnation = std::stoll(v.substr(0, colon));
    const std::string rest = v.substr(colon + 1);
    if (rest == "dead") {
      h.dead = true;
    } else {
      h.counter = std::stoll(rest);
    }
  } catch (...) {
    return std::nullopt;
  }
  return h;
}

/// The value of `key`, or nullopt when it is absent, in one round trip that never waits:
/// compare_set with an expected value no key holds changes nothing and returns the current
/// value (or that expected value, for a missing key).
inline std::optional<std::string> peek(Store& store, const std::string& key) {
  static const std::string absent("\x01ember-ft-absent", 16);
  std::string v = store.compare_set(key, absent, absent);
  if (v == absent) return std::nullopt;
  return v;
}

/// The environment ember-run --ft gives each rank (besides torchrun's RANK, WORLD_SIZE, ...).
inline constexpr const char* kEnvEnabled = "EMBER_FT";                        // "1"
inline constexpr const char* kEnvTimeoutMs = "EMBER_FT_TIMEOUT_MS";           // --ft-timeout
inline constexpr const char* kEnvMinRanks = "EMBER_FT_MIN_RANKS";             // --ft-min-ranks
inline constexpr const char* kEnvQuorumTimeoutMs = "EMBER_FT_QUORUM_TIMEOUT_MS";  // --ft-quorum-timeout
inline constexpr const char* kEnvIncarnation = "EMBER_FT_INCARNATION";        // restarts of this slot

}  // namespace ember::parallel::ft
