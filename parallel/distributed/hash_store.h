// HashStore: an in-memory Store shared by the threads of one process, for ranks-as-threads
// tests and single-process jobs. Share one instance (std::shared_ptr) between the ranks.
// Thread-safe; blocking get/wait sleep on a condition variable, never poll.
#pragma once
#include <condition_variable>
#include <map>
#include <mutex>

#include "parallel/distributed/store.h"

namespace ember::parallel {

class HashStore : public Store {
 public:
  explicit HashStore(int64_t timeout_ms = kDefaultTimeoutMs) : Store(timeout_ms) {}

 protected:
  EMBER_STORE_HOOKS_OVERRIDE;

 private:
  bool all_present_locked(const std::vector<std::string>& keys) const;

  std::mutex mutex_;
  std::condition_variable cv_;                    // notified on every write; guarded by mutex_
  std::map<std::string, std::vector<uint8_t>> map_;  // guarded by mutex_
};

}  // namespace ember::parallel
