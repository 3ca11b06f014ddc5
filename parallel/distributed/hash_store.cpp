#include "parallel/distributed/hash_store.h"

#include "core/error.h"

namespace ember::parallel {

using Clock = std::chrono::steady_clock;

void HashStore::set_impl(const std::string& key, const std::vector<uint8_t>& value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    map_[key] = value;
  }
  cv_.notify_all();
}

std::vector<uint8_t> HashStore::get_impl(const std::string& key, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto deadline = detail::deadline_after(timeout_ms);
  if (!cv_.wait_until(lock, deadline, [&] { return map_.count(key) > 0; }))
    EMBER_THROW(TimeoutError, "HashStore::get: timed out after ", timeout_ms,
                " ms waiting for key '", key, "'");
  auto it = map_.find(key);
  return it->second;
}

int64_t HashStore::add_impl(const std::string& key, int64_t delta) {
  int64_t value = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(key);
    value = detail::added_counter(key, it != map_.end() ? &it->second : nullptr, delta);
    map_[key] = detail::format_counter(value);
  }
  cv_.notify_all();
  return value;
}

std::vector<uint8_t> HashStore::compare_set_impl(const std::string& key,
                                                 const std::vector<uint8_t>& expected,
                                                 const std::vector<uint8_t>& desired) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = map_.find(key);
  const auto outcome = detail::compare_set_rule(it == map_.end() ? nullptr : &it->second, expected, desired);
  std::vector<uint8_t> result = *outcome.result;
  if (!outcome.write) return result;
  map_[key] = desired;
  lock.unlock();
  cv_.notify_all();
  return result;
}

bool HashStore::all_present_locked(const std::vector<std::string>& keys) const {
  for (const auto& k : keys)
    if (map_.find(k) == map_.end()) return false;
  return true;
}

bool HashStore::check_impl(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mutex_);
  return all_present_locked(keys);
}

void HashStore::wait_impl(const std::vector<std::string>& keys, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto deadline = detail::deadline_after(timeout_ms);
  if (cv_.wait_until(lock, deadline, [&] { return all_present_locked(keys); })) return;
  std::vector<std::string> missing;
  for (const auto& k : keys)
    if (map_.find(k) == map_.end()) missing.push_back(k);
  EMBER_THROW(TimeoutError, "HashStore::wait: timed out after ", timeout_ms,
              " ms waiting for keys ", detail::format_keys(missing));
}

bool HashStore::delete_key_impl(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return map_.erase(key) > 0;
}

int64_t HashStore::num_keys_impl() {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(map_.size());
}

}  // namespace ember::parallel
