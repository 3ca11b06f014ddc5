// Ranks as threads for the tcp backend's tests: n ProcessGroupTCPs over one in-memory HashStore
// (loopback connections), built and then driven on one thread per rank.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "parallel/distributed/hash_store.h"
#include "parallel/distributed/tcp/process_group_tcp.h"

namespace ember::parallel::test {

/// Options for tests on 127.0.0.1 with the given timeout, the shared-memory path on or off.
inline ProcessGroupTCPOptions tcp_options(int64_t timeout_ms, bool shared_memory) {
  ProcessGroupTCPOptions o;
  o.timeout_ms = timeout_ms;
  o.host = "127.0.0.1";
  o.shared_memory = shared_memory;
  return o;
}

using Groups = std::vector<std::unique_ptr<ProcessGroupTCP>>;

/// Builds n groups (one per rank, each constructed on its own thread, as rendezvous needs);
/// rank r's options are options_of(r). A rank whose construction threw is a test failure.
inline Groups make_groups(int n, const std::function<ProcessGroupTCPOptions(int)>& options_of) {
  auto store = std::make_shared<HashStore>();
  Groups groups(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        groups[r] = std::make_unique<ProcessGroupTCP>(store, r, n, options_of(r));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return groups;
}

inline Groups make_groups(int n, ProcessGroupTCPOptions o) {
  return make_groups(n, [&o](int) { return o; });
}

/// Runs f(rank's group) on one thread per rank; an exception is a test failure naming the rank.
inline void on_ranks(Groups& groups, const std::function<void(ProcessGroupTCP&)>& f) {
  std::vector<std::thread> threads;
  for (auto& g : groups)
    threads.emplace_back([&f, &g] {
      try {
        f(*g);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << g->rank() << " threw: " << e.what();
      }
    });
  for (auto& t : threads) t.join();
}

}  // namespace ember::parallel::test
