// PrefixStore: a namespace inside another Store. Every key k becomes "<prefix>/k" in the
// underlying store, so several groups (or restarts) can share one store without clashes.
// Thread-safe as the underlying store is; it shares ownership of that store.
#pragma once
#include <memory>

#include "parallel/distributed/store.h"

namespace ember::parallel {

class PrefixStore : public Store {
 public:
  /// Throws ValueError when prefix is empty or store is null. The timeout starts as the
  /// underlying store's; set_timeout on a PrefixStore does not change the underlying one.
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);

  const std::string& prefix() const { return prefix_; }
  const std::shared_ptr<Store>& underlying_store() const { return store_; }

 protected:
  void set_impl(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get_impl(const std::string& key, int64_t timeout_ms) override;
  int64_t add_impl(const std::string& key, int64_t delta) override;
  std::vector<uint8_t> compare_set_impl(const std::string& key, const std::vector<uint8_t>& expected,
                                        const std::vector<uint8_t>& desired) override;
  bool check_impl(const std::vector<std::string>& keys) override;
  void wait_impl(const std::vector<std::string>& keys, int64_t timeout_ms) override;
  bool delete_key_impl(const std::string& key) override;
  /// The underlying store's count (all prefixes), as PyTorch's PrefixStore reports.
  int64_t num_keys_impl() override;

 private:
  std::string join(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> join(const std::vector<std::string>& keys) const;

  const std::string prefix_;
  const std::shared_ptr<Store> store_;
};

}  // namespace ember::parallel
