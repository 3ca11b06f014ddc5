#include "parallel/distributed/prefix_store.h"

#include "core/error.h"

namespace ember::parallel {

namespace {
int64_t timeout_of(const std::shared_ptr<Store>& store) {
  EMBER_CHECK_T(ValueError, store != nullptr, "PrefixStore: the underlying store must not be null");
  return store->timeout();
}
}  // namespace

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : Store(timeout_of(store)), prefix_(std::move(prefix)), store_(std::move(store)) {
  EMBER_CHECK_T(ValueError, !prefix_.empty(), "PrefixStore: prefix must not be empty");
}

std::vector<std::string> PrefixStore::join(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(join(k));
  return out;
}

void PrefixStore::set_impl(const std::string& key, const std::vector<uint8_t>& value) {
  store_->set(join(key), value);
}

std::vector<uint8_t> PrefixStore::get_impl(const std::string& key, int64_t timeout_ms) {
  return store_->get(join(key), timeout_ms);
}

int64_t PrefixStore::add_impl(const std::string& key, int64_t delta) {
  return store_->add(join(key), delta);
}

std::vector<uint8_t> PrefixStore::compare_set_impl(const std::string& key,
                                                   const std::vector<uint8_t>& expected,
                                                   const std::vector<uint8_t>& desired) {
  return store_->compare_set(join(key), expected, desired);
}

bool PrefixStore::check_impl(const std::vector<std::string>& keys) {
  return store_->check(join(keys));
}

void PrefixStore::wait_impl(const std::vector<std::string>& keys, int64_t timeout_ms) {
  store_->wait(join(keys), timeout_ms);
}

bool PrefixStore::delete_key_impl(const std::string& key) { return store_->delete_key(join(key)); }

int64_t PrefixStore::num_keys_impl() { return store_->num_keys(); }

}  // namespace ember::parallel
