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
  void set_impl(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get_impl(const std::string& key, int64_t timeout_ms) override;
  int64_t add_impl(const std::string& key, int64_t delta) override;
  std::vector<uint8_t> compare_set_impl(const std::string& key, const std::vector<uint8_t>& expected,
                                        const std::vector<uint8_t>& desired) override;
  bool check_impl(const std::vector<std::string>& keys) override;
  void wait_impl(const std::vector<std::string>& keys, int64_t timeout_ms) override;
  bool delete_key_impl(const std::string& key) override;
  int64_t num_keys_impl() override;

 private:
  bool all_present_locked(const std::vector<std::string>& keys) const;

  std::mutex mutex_;
  std::condition_variable cv_;                    // notified on every write; guarded by mutex_
  std::map<std::string, std::vector<uint8_t>> map_;  // guarded by mutex_
};

}  // namespace ember::parallel
