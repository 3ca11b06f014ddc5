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
  // num_keys(): the underlying store's count (all prefixes), as PyTorch's PrefixStore reports.
  EMBER_STORE_HOOKS_OVERRIDE;

 private:
  std::string join(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> join(const std::vector<std::string>& keys) const;

  const std::string prefix_;
  const std::shared_ptr<Store> store_;
};

}  // namespace ember::parallel
